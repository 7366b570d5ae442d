"""The figure rows and the report made from them. Every benchmark prints its rows (one JSON object a line) to
bench-results/results.jsonl, the Python sections through `figure`, `paired` and `latency_row` here and the Swift
signalfetch-bench in the same shape; `python3 -m signalfetch.report RESULTS.jsonl OUT_DIR MODE` writes report.md,
report.json and the charts (gnuplot) from them.

A figure row: benchmark, title, unit, ours_label, ours, baseline_label, baseline, ratio, goal, goal_op (">=" or
"<="), met, and any details (round_ratios, samples_…, finding, chart: false to leave it off the chart). A latency
row: benchmark, title, p50_ms, p90_ms, p99_ms, max_ms, samples, goal_p99_ms, met, finding when missed."""
import json, os, platform, shutil, subprocess, sys

from . import measure


# MARK: - Rows

def figure(benchmark, title, unit, ours_label, ours, base_label, base, goal, higher_is_better=True, **details):
    """One ratio row; a `goal` of None is a figure the report only states (`met` None, "reported")."""
    ratio = ours / base if base else 0.0
    met = None if goal is None else (ratio >= goal if higher_is_better else ratio <= goal)
    record = {"benchmark": benchmark, "title": title, "unit": unit, "ours_label": ours_label,
              "ours": round(ours, 1), "baseline_label": base_label, "baseline": round(base, 1),
              "ratio": round(ratio, 3), "goal": goal, "goal_op": ">=" if higher_is_better else "<=", "met": met}
    record.update(details)
    return record


def paired(benchmark, title, unit, ours_label, ours, base_label, base, goal, **details):
    """A figure from interleaved rounds: each round's ours ÷ baseline (both sides measured back to back, so they
    saw the same moments of the machine); the median round is the figure, and the spread of the ratios says how
    much the machine moved."""
    ratios = [o / b for o, b in zip(ours, base) if b]
    order = sorted(range(len(ratios)), key=lambda i: ratios[i])
    mid = order[len(order) // 2]
    record = figure(benchmark, title, unit, ours_label, ours[mid], base_label, base[mid], goal, **details)
    record.update({"round_ratios": [round(r, 3) for r in ratios],
                   "ratio_spread": round(max(ratios) - min(ratios), 3) if ratios else None,
                   "samples_ours": [round(v) for v in ours], "samples_baseline": [round(v) for v in base]})
    return record


def latency_row(benchmark, title, samples, goal_p99, finding, **details):
    """A freshness (or reach) row from ms samples: p50/p90/p99/max and the count, met when p99 ≤ `goal_p99`;
    `finding` names what missed (the figures follow it)."""
    row = {"benchmark": benchmark, "title": title, **measure.latency_summary(samples), "goal_p99_ms": goal_p99}
    row.update(details)
    p99 = measure.percentile(samples, 99)
    row["met"] = p99 <= goal_p99
    if not row["met"]:
        row["finding"] = f"{finding} p99 {p99:.1f} ms misses the goal ≤ {goal_p99} ms"
    return row


def missed_events(row, missing, what):
    """Marks a latency row missed when `missing` of its events never came: `what` names them ("(stream, round)
    pairs heard no state event")."""
    if missing:
        row["met"] = False
        row["finding"] = (row.get("finding", "") + f" {missing} {what}.").strip()
    return row


def emit(record):
    print(json.dumps(record), flush=True)


# MARK: - Findings for the store's figures (signalfetch-bench store prints them with the measurements behind them)

def add_finding(r, text):
    r["finding"] = (r["finding"] + " " if r.get("finding") else "") + text


def store_commit_finding(r):
    """Why group commit at FULL misses 5× with 8 producers (the COMMIT's own cost bounds it)."""
    add_finding(r,
        f"At synchronous FULL the store's COMMIT alone takes {r['full_group_commit_us']} µs per "
        f"transaction ({r['full_deliveries_per_tx']} deliveries each) against {r['full_single_tx_us']} "
        f"µs for a whole one-message transaction (its COMMIT {r['full_single_commit_us']} µs). With 8 "
        f"producers at most 8 deliveries share a COMMIT, so the group-commit ratio cannot pass "
        f"{r['full_ratio_bound']} on this disk even if the deliveries' SQL and scheduling took no time. "
        f"The same producers making writes that change nothing (each reads one message and writes "
        f"no row, so no fsync) take {r['full_machinery_us']} µs per transaction; with that added to "
        f"the COMMIT the ratio could reach {r['full_ratio_ceiling']} if inserting a message cost no "
        f"more than reading one.")


def store64_finding(r):
    """Why group commit with 64 producers misses 10× (the work per delivery without any fsync bounds it)."""
    single_us = 1e6 / r["full64_single_tx_per_s"]
    work_us = 1e6 / r["off64_group_commit_per_s"]
    commit_share = r["full64_group_commit_us"] / float(r["full64_deliveries_per_tx"])
    add_finding(r, f"At 64 producers one transaction per message takes {single_us:.0f} µs, and a delivery's work "
                   f"without any fsync (the same producers at OFF) {work_us:.1f} µs, so group commit cannot pass "
                   f"{single_us / work_us:.1f}× even with a free COMMIT; with its COMMIT share "
                   f"({commit_share:.1f} µs per delivery) not overlapped at all the bound is "
                   f"{single_us / (work_us + commit_share):.1f}×. The measured {r['ratio']:.2f}× sits between the two.")


def durability_finding(r):
    """Why FULL misses 0.8 of OFF with 64 producers (the one writer runs a batch's SQL, then its COMMIT)."""
    per_delivery_off = 1e6 / r["off64_group_commit_per_s"]
    commit_share = r["full64_group_commit_us"] / float(r["full64_deliveries_per_tx"])
    bound = per_delivery_off / (per_delivery_off + commit_share)
    add_finding(r, f"With 64 producers a transaction holds {r['full64_deliveries_per_tx']} deliveries and its "
                   f"COMMIT at FULL takes {r['full64_group_commit_us']} µs, {commit_share:.1f} µs per delivery, "
                   f"against {per_delivery_off:.1f} µs of work per delivery at OFF. The one writer connection "
                   f"runs a batch's SQL and its COMMIT one after the other, so where the producers' own work "
                   f"does not cover the COMMIT, FULL ÷ OFF tends to {bound:.2f}; the measured ratio is above "
                   f"that because part of it is covered. Overlapping the next batch's SQL with the COMMIT would "
                   f"make batches visible before they are durable (docs/architecture.md, \"Group commit\").")


FINDINGS = {"store-group-commit": store_commit_finding, "store-group-commit-64": store64_finding,
            "store-durability-cost-64": durability_finding}


def add_findings(figures):
    """The bound behind each missed store figure, from the measurements it carries."""
    for f in figures:
        if f["met"] is False and f["benchmark"] in FINDINGS and not f.get("finding"):
            FINDINGS[f["benchmark"]](f)


# MARK: - The report

def machine_info(mode):
    cpu = "unknown"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kb = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal:"))
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True).stdout.strip()
    return {"nproc": os.cpu_count(), "cpu_model": cpu, "memory_gb": round(mem_kb / 1024 / 1024, 1),
            "machine": platform.machine(), "kernel": platform.release(), "revision": rev + ("+dirty" if dirty else ""),
            "mode": mode, "loadavg": open("/proc/loadavg").read().split()[:3]}


def fmt(v):
    if isinstance(v, float):
        return f"{v:,.1f}" if abs(v) >= 10 else f"{v:,.3g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def gnuplot(script):
    """Runs a gnuplot script (pngcairo, else png); None when it worked, else gnuplot's complaint."""
    r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    if r.returncode:
        r = subprocess.run(["gnuplot"], input=script.replace("pngcairo", "png"), text=True, capture_output=True)
    return None if r.returncode == 0 else r.stderr[-300:]


def throughput_chart(out, bars):
    with open(os.path.join(out, "throughput.dat"), "w") as f:
        for fig in bars:
            f.write(f"\"{fig['benchmark']}\\n{fig['ratio']:.2f}x\" {fig['ours']} {fig['baseline']}\n")
    failed = gnuplot(f"""set terminal pngcairo size 1100,520 noenhanced font ',10'
set output '{out}/throughput.png'
set title 'Throughput against the same-run baseline (log scale; label: ratio)'
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set logscale y
set ylabel 'operations per second'
set grid ytics
set key top right
set xtics font ',8'
plot '{out}/throughput.dat' using 2:xtic(1) title 'SignalFetch' lc rgb '#2a6fdb', '' using 3 title 'baseline' lc rgb '#aaaaaa'
""")
    return "throughput.png" if failed is None else "throughput chart failed: " + failed


def freshness_chart(out, fresh, floor):
    failed = gnuplot(f"""set terminal pngcairo size 900,520 noenhanced font ',10'
set output '{out}/e2e-freshness.png'
set title 'Freshness: delivery acknowledged (201) -> message in the device cache'
set xlabel 'milliseconds (log scale)'
set ylabel 'fraction of (delivery, device) pairs'
set logscale x
set grid
set key bottom right
stats '{fresh}' using 1 nooutput name 'F'
stats '{floor}' using 1 nooutput name 'G'
plot '{fresh}' using ($1 < 0.1 ? 0.1 : $1):($0 + 1) / F_records with steps lw 2 title 'freshness (CDF)', \\
     '{floor}' using ($1 < 0.1 ? 0.1 : $1):($0 + 1) / G_records with steps lw 2 title 'raw /v1/changes round trip (floor)'
""")
    return "e2e-freshness.png" if failed is None else "freshness chart failed: " + failed


def charts(out, figures):
    if not shutil.which("gnuplot"):
        return ["gnuplot is not installed: no charts"]
    notes = []
    bars = [f for f in figures if f.get("chart", True) and f["unit"] != "ms"]
    if bars:
        notes.append(throughput_chart(out, bars))
    fresh = os.path.join(out, "e2e-freshness.dat")
    if os.path.exists(fresh):
        notes.append(freshness_chart(out, fresh, os.path.join(out, "e2e-floor.dat")))
    return notes


def header(machine, mode):
    return ["# SignalFetch benchmark report", "",
            f"Revision `{machine['revision']}`, mode **{mode}**; {machine['nproc']} CPUs ({machine['cpu_model']}), "
            f"{machine['memory_gb']} GB RAM, {machine['machine']}, Linux {machine['kernel']}, load average "
            f"{' '.join(machine['loadavg'])} at the end.",
            "",
            "Every ratio compares two figures measured in this same run on this machine (a shared, noisy 2-core box:",
            "compare ratios, not absolute numbers, between runs). Where both sides ran in interleaved rounds, the",
            "figure is the median round's ratio and the range of every round's ratio follows it; elsewhere the best",
            "of the alternating rounds is shown. Every sample is in `report.json`. Benchmarks are measurements, not",
            "tests: a missed goal is a finding below.", ""]


def summary_table(figures):
    L = ["## Summary", "", "| figure | SignalFetch | baseline | ratio | goal | |", "|---|---|---|---|---|---|"]
    for f in figures:
        # Interleaved rounds: the median round's ratio, with the range of every round's ratio.
        spread = ""
        if f.get("round_ratios"):
            spread = f" ({min(f['round_ratios']):.3g}–{max(f['round_ratios']):.3g} over {len(f['round_ratios'])} rounds)"
        L.append(f"| {f['title']} | {fmt(f['ours'])} {f['unit']} ({f['ours_label']}) | {fmt(f['baseline'])} "
                 f"{f['unit']} ({f['baseline_label']}) | **{f['ratio']:.3g}**{spread} | "
                 f"{'—' if f['goal'] is None else str(f['goal_op']) + ' ' + str(f['goal'])} | "
                 f"{'reported' if f['met'] is None else 'met' if f['met'] else '**MISSED**'} |")
    return L + [""]


def apns_sim_rss_section(r):
    return ["## apns-sim memory", "",
            "| idle | 1,000 devices | after the load runs | 10,000 devices | per extra device |",
            "|---|---|---|---|---|",
            f"| {r['rss_idle_mb']} MB | {r['rss_1k_mb']} MB | {r['rss_after_load_mb']} MB | "
            f"{r['rss_10k_mb']} MB ({r['devices']:,} connected) | {r['per_device_kb']} KB |", ""]


def freshness_section(r):
    return ["## End to end freshness", "",
            f"{r['devices']} devices (`mail-client run` processes, {r['accounts']} accounts × 2), "
            f"{r['deliveries']:,} deliveries at ~{r['offered_rate']:.0f}/s (Poisson), apns-sim and mailboxd "
            f"(release). Freshness = from the delivery's 201 until a device reports a completed sync whose "
            f"state covers it; {r['samples']:,} (delivery, device) pairs.", "",
            "| p50 | p90 | p99 | max | floor p50 (raw `/v1/changes` round trip) | floor p99 | p50 ÷ floor |",
            "|---|---|---|---|---|---|---|",
            f"| {r['p50_ms']} ms | {r['p90_ms']} ms | {r['p99_ms']} ms | {r['max_ms']} ms | "
            f"{r['floor_p50_ms']} ms | {r['floor_p99_ms']} ms | {r['ratio_p50_to_floor']} |", "",
            f"Signals received {r['signals_received']:,}, syncs {r['syncs']:,}; {r['synced_before_201']} "
            "pairs synced before the sender saw its 201 (counted as 0 ms). Goal: p99 ≤ "
            f"{r.get('goal_p99_ms', 25)} ms ({'met' if r.get('met') else '**missed**'}). Signals are paced "
            "per device (a burst of 20, then one a second), so a device that is not flooded is signalled at "
            "once.", ""]


def fleet_section(r):
    return [f"## Freshness with {r['devices']:,} devices", "",
            f"{r['devices']:,} simulated devices running the real MailSync engine, {r['devices'] // r['processes']:,} "
            f"to a `mail-client fleet` process ({r['processes']} processes, {r['accounts']} accounts × "
            f"{r['devices'] // r['accounts']}), {r['deliveries']:,} deliveries at ~{r['offered_rate']:.0f}/s "
            f"(Poisson); {r['samples']:,} (delivery, device) pairs.", "",
            "| p50 | p90 | p99 | max | goal p99 | |", "|---|---|---|---|---|---|",
            f"| {r['p50_ms']} ms | {r['p90_ms']} ms | {r['p99_ms']} ms | {r['max_ms']} ms | ≤ {r['goal_p99_ms']} ms | "
            f"{'met' if r['met'] else '**MISSED**'} |", ""]


def urlsession_freshness_section(r):
    return ["## Freshness of the URLSession devices", "",
            f"{r['devices']} of the 100 devices above talk to the API through URLSession (`--transport urlsession`, "
            "FoundationNetworking), the others through libcurl; the same deliveries, "
            f"{r['samples']:,} (delivery, device) pairs.", "",
            "| p50 | p90 | p99 | max | libcurl devices p50 / p99 | goal p99 | |", "|---|---|---|---|---|---|---|",
            f"| {r['p50_ms']} ms | {r['p90_ms']} ms | {r['p99_ms']} ms | {r['max_ms']} ms | "
            f"{r['libcurl_p50_ms']} / {r['libcurl_p99_ms']} ms | ≤ {r['goal_p99_ms']} ms | "
            f"{'met' if r['met'] else '**MISSED**'} |", ""]


def burst_section(r):
    L = ["## A burst to one account", "",
         f"{r['deliveries']:,} deliveries to one account in {r['burst_seconds']} s (8 senders). Pacing: a "
         f"burst of {r['pacing_burst']}, then {r['pacing_refill_per_s']} a second; each device may get at "
         "most burst + refill × seconds signals (counted until its last one) and must end at the final "
         "state.", "",
         "| device | signals | until the last (s) | bound |", "|---|---|---|---|"]
    L += [f"| {d['device']} | {d['signals']} | {d['span_s']} | {d['bound']} |" for d in r["devices"]]
    return L + ["", f"Converged: {'yes' if r['converged'] else 'no'}; bound "
                    f"{'held' if r['met'] else '**exceeded**'}.", ""]


def traffic_section(r):
    return ["## Sync traffic", "",
            "| one-message incremental sync | full refetch of the same mailbox | messages | ratio |",
            "|---|---|---|---|",
            f"| {r['incremental_bytes']:,} B | {r['full_refetch_bytes']:,} B | {r['mailbox_messages']} | "
            f"{r['ratio_full_to_incremental']}× |", "",
            "Response body bytes (`/v1/changes?since=…&max=1` vs every `/v1/messages` page), averaged over "
            f"{r['accounts_sampled']} accounts.", ""]


def cpu_section(r):
    L = [f"## {r['title']}", "",
         f"**{r['cpu_ms_per_delivery']} ms** of mailboxd CPU per delivery (goal ≤ {r['goal_ms']} ms: "
         f"{'met' if r['met'] else '**missed**'}), by thread:", "",
         "| thread | CPU per delivery | context switches per delivery |", "|---|---|---|"]
    L += [f"| {name} | {t['cpu_ms']} ms | {t['switches']} |" for name, t in r["by_thread"].items()]
    return L + [""]


def imap_section(r):
    """signalfetch.bench.imap's summary: each server's figures side by side."""
    lat, mem, q = r["latency"], r["memory"], r["qresync_median_ms"]
    L = ["## IMAP against Dovecot 2.3", "",
         "Delivery → EXISTS: ms from the LMTP 250 to each idling client's `* n EXISTS` (the kernel's receive times "
         f"of both), {r['deliveries']} deliveries per client count, the servers taking turns.", "",
         "| idling clients | mailboxd p50 | p99 | max | Dovecot p50 | p99 | max | CPU per delivery (mailboxd, "
         "Dovecot) |", "|---|---|---|---|---|---|---|---|"]
    for count in r["idle_counts"]:
        m, d = lat["mailboxd"][str(count)], lat["dovecot"][str(count)]
        L.append(f"| {count:,} | {m['p50_ms']} ms | {m['p99_ms']} ms | {m['max_ms']} ms | {d['p50_ms']} ms | "
                 f"{d['p99_ms']} ms | {d['max_ms']} ms | {m['cpu_ms_per_delivery']} ms, "
                 f"{d['cpu_ms_per_delivery']} ms |")
    L += ["", "| | mailboxd | Dovecot |", "|---|---|---|",
          f"| UID FETCH 1:* first (messages/s) | {fmt(r['fetch_first']['mailboxd'])} | "
          f"{fmt(r['fetch_first']['dovecot'])} |",
          f"| UID FETCH 1:* repeated (messages/s) | {', '.join(fmt(v) for v in r['fetch_repeated']['mailboxd'])} | "
          f"{', '.join(fmt(v) for v in r['fetch_repeated']['dovecot'])} |"]
    for name, label in (("Archive", "small"), ("INBOX", "large")):
        L.append(f"| QRESYNC SELECT after 100 changes, {label} mailbox ({r['mailbox_sizes']['mailboxd'][name]:,} "
                 f"messages; median ms) | {q['mailboxd'][name]} | {q['dovecot'][name]} |")
    L.append(f"| QRESYNC large ÷ small | {r['qresync_scaling']['mailboxd']} | {r['qresync_scaling']['dovecot']} |")
    L.append(f"| LMTP load, {r.get('lmtp_sessions', 8)} sessions (messages/s) | {r['lmtp_load_rates']['mailboxd']} | "
             f"{r['lmtp_load_rates']['dovecot']} |")
    for key, label in (("per_connection_kib", "authenticated"), ("per_idling_connection_kib", "in IDLE on INBOX")):
        L.append(f"| memory per connection, {label} (KiB; mailboxd RSS, Dovecot PSS of every process) | "
                 f"{mem['mailboxd'][key]} | {mem['dovecot'][key]} |")
    L.append(f"| {mem['mailboxd']['connections']:,} connections opened (s) | {mem['mailboxd']['open_seconds']} | "
             f"{mem['dovecot']['open_seconds']} |")
    L.append("")
    for name, lines in (("mailboxd", r.get("mailboxd_log")), ("Dovecot", r.get("dovecot_log"))):
        if lines:
            L += [f"{name}'s log (errors and warnings, last {len(lines)}):", "", "```", *lines, "```", ""]
    return L


def connections_section(r):
    """signalfetch.bench.connections' summary: both servers at each count of idle TLS connections."""
    steps, opening = r["steps"], r["opening"]

    def cells(step):
        held = "" if step["connections"] == step["asked"] else f" ({step['connections']:,} held)"
        kib = step.get("kib_per_connection")
        return (f"{step['p50_ms']} ms{held} | {step['p99_ms']} ms | {step['p99_ratio']} ({step['plain_p99_ratio']}) | "
                f"{'–' if kib is None else kib}")

    L = ["## Idle TLS connections against nginx", "",
         "A legitimate client's keep-alive GET while N idle TLS connections are held (handshake done, nothing sent; "
         f"{r['requests']:,} requests a step in rounds of {r['round']}, p50 and p99 the median round's) and the "
         "server's memory per held connection, the same counts against both. p99 ÷ none: each round's p99 ÷ that of "
         "an idle twin of the server measured right after it, the median round (at 0, two idle twins: the "
         "measurement's noise); in brackets p99 at N ÷ p99 measured with none before the climb.", "",
         "| idle connections | mailboxd p50 | p99 | p99 ÷ none | KiB each | nginx p50 | p99 | p99 ÷ none | KiB each |",
         "|---|---|---|---|---|---|---|---|---|"]
    for ours, theirs in zip(steps["mailboxd"], steps["nginx"]):
        L.append(f"| {ours['asked']:,} | {cells(ours)} | {cells(theirs)} |")
    L += ["", "| while the connections opened | mailboxd | nginx |", "|---|---|---|"]
    for key, label in (("accepts_per_s", "TLS accepts/s"), ("server_cpu_ms_per_accept", "server CPU per accept (ms)"),
                       ("client_cpu_ms_per_handshake", "the holders' CPU per handshake (ms)")):
        L.append(f"| {label} | {fmt(opening['mailboxd'][key])} | {fmt(opening['nginx'][key])} |")
    return L + [""]


def jmap_ws_fanout_section(r):
    """signalfetch.bench.jmap_ws's fan-out row: both socket counts, the clients reading and holding off."""
    L = ["## JMAP over WebSocket: one change to many sockets", "",
         "From just before a delivery's POST to each socket's StateChange (the kernel's receive time on the client "
         f"socket), {r['deliveries']} deliveries per count, every other one while the {r['holders']} holder process "
         "holds off reading (so they do not compete with mailboxd for the cores); when the clients handled the "
         "StateChange beside it.", "",
         "| sockets | p50 | p90 | p99 | max | clients holding off p50 / p99 | handled by the clients p99 | "
         "mailboxd CPU per delivery (its loop thread) | the holder's CPU |", "|---|---|---|---|---|---|---|---|---|"]
    for step in [v for k, v in r.items() if k.startswith("sockets_")] + [r]:
        held = step["clients_holding_off"]
        cpu = step["mailboxd_cpu_ms_per_delivery"]
        cpu = cpu[str(step["sockets"])] if isinstance(cpu, dict) else cpu
        L.append(f"| {step['sockets']:,} | {step['p50_ms']} ms | {step['p90_ms']} ms | {step['p99_ms']} ms | "
                 f"{step['max_ms']} ms | {held['p50_ms']} / {held['p99_ms']} ms | {step['handled']['p99_ms']} ms | "
                 f"{cpu} ms ({step['loop_cpu_ms_per_delivery']} ms) | {step['holders_cpu_ms_per_delivery']} ms |")
    L += ["", f"Goal p99 ≤ {r['goal_p99_ms']} ms at {r['sockets']:,} sockets: {'met' if r['met'] else '**missed**'}; "
          f"mailboxd with no socket open: {r['mailboxd_cpu_ms_per_delivery']['0']} ms CPU per delivery.", ""]
    return L


SECTIONS = {"apns-sim-rss": apns_sim_rss_section, "e2e-freshness": freshness_section, "e2e-fleet": fleet_section,
            "e2e-freshness-urlsession": urlsession_freshness_section,
            "e2e-burst": burst_section, "e2e-traffic": traffic_section, "scale-cpu": cpu_section,
            "imap-summary": imap_section, "connections-summary": connections_section,
            "jmap-ws-fanout": jmap_ws_fanout_section}


def findings_section(rows, missed):
    L = ["## Findings", ""]
    if not missed and not any(r.get("finding") for r in rows):
        L.append("Every goal was met.")
    for f in missed:
        ratio_met = f["ratio"] >= f["goal"] if f["goal_op"] == ">=" else f["ratio"] <= f["goal"]
        if ratio_met and f.get("finding"):
            continue  # the ratio holds; what missed is an absolute goal, which the row's finding (below) names
        extra = ""
        if f.get("ours_failed"):
            extra = (f" {f['ours_failed']} of {f['ours_sent']:,} APNsClient sends failed with transport errors; the "
                     f"client opened {f['ours_connections']} connections per run instead of 1.")
        L.append(f"- **{f['title']}**: ratio {f['ratio']:.3g} misses the goal {f['goal_op']} {f['goal']} "
                 f"({fmt(f['ours'])} vs {fmt(f['baseline'])} {f['unit']}).{extra}")
    L += [f"- {r['finding']}" for r in rows if r.get("finding")]
    return L


def write_report(results_path, out, mode):
    rows = [json.loads(line) for line in open(results_path) if line.strip().startswith("{")]
    machine = machine_info(mode)
    figures = [r for r in rows if "ratio" in r and "goal" in r and "ours" in r]
    add_findings(figures)
    missed = [f for f in figures if f["met"] is False]
    made = charts(out, figures)
    json.dump({"machine": machine, "figures": figures, "results": rows, "charts": made,
               "findings": [f"{f['benchmark']}: ratio {f['ratio']} misses the goal {f['goal_op']} {f['goal']}"
                            for f in missed] + [r["finding"] for r in rows if r.get("finding")]},
              open(os.path.join(out, "report.json"), "w"), indent=2)
    L = header(machine, mode) + summary_table(figures)
    for r in rows:
        if r["benchmark"] in SECTIONS:
            L += SECTIONS[r["benchmark"]](r)
    L += findings_section(rows, missed)
    L += ["", "## Charts", ""] + [f"![{c}]({c})" if c.endswith(".png") else f"- {c}" for c in made]
    open(os.path.join(out, "report.md"), "w").write("\n".join(L) + "\n")
    return L


def main():
    """python3 -m signalfetch.report RESULTS.jsonl OUT_DIR MODE"""
    results_path, out, mode = sys.argv[1:4]
    print("\n".join(write_report(results_path, out, mode)))


if __name__ == "__main__":
    main()
