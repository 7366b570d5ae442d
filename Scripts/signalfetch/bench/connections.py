"""connections: idle TLS connections held against mailboxd, up to its connection limit, and against nginx (Debian's
nginx-light with the same certificate and key, a TLS server block serving a small static file with keep-alive) in
the same run, the same counts for both: none (the baseline), 1,000, 5,000, 10,000 and the limit (mailboxd's
--max-connections, the hard open-file limit less 1,024, less a few places for the measuring client).

The connections come from holder processes (signalfetch.idle: at most 5,000 each, each from a loopback address of its
own), every handshake completed and verified against the topology's CA, then nothing sent. At each count:

- a legitimate client's latency: one keep-alive TLS connection, a warm-up, then sequential small GETs (mailboxd:
  `GET /v1/mailboxes` with a session token; nginx: the static file), p50 and p99; the figures are p99 at N ÷ p99 at
  none per count, and the flatness, p99 at the limit ÷ p99 at 1,000 (the same as the limit's ratio ÷ 1,000's);
- memory per idle connection: (the server's RSS at N − at none) ÷ N, mailboxd's own, nginx's summed over its master
  and workers;
- every held connection is looked at (still open?), so a count that shrank is reported, not measured as if whole.

TLS accepts per second: the connections opened ÷ the seconds spent opening them, over the whole climb to the limit,
with each server's CPU per accept beside it (the holders' handshakes cost CPU on the same two cores, which bounds
both rates alike). Both servers close a connection that never sends a request after 60 s (mailboxd's idle timeout,
nginx's client_header_timeout), so a whole climb and its measurements stay within that. Standard library only."""
import resource
import time

from .. import harness, idle, log
from ..measure import elapsed_ms, percentile, process_cpu, rss_kb, tree_cpu, tree_rss_kb
from ..report import emit, figure

USER = "conn"
COUNTS = (1000, 5000, 10000)
RESERVE = 16  # places below mailboxd's limit left for the measuring client
IDLE_TIMEOUT = 60  # s: mailboxd's HTTP idle timeout, nginx's client_header_timeout
P99_GOAL, FLATNESS_GOAL, MEMORY_GOAL_KIB, MEMORY_RATIO_GOAL, ACCEPT_GOAL = 1.2, 1.1, 16.0, 2.0, 0.5
SERVERS = ("mailboxd", "nginx")


def connection_limit():
    """mailboxd's connection limit here: the hard open-file limit less the 1,024 descriptors it keeps for itself."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[1] - 1024


class Server:
    """One server under test: where it listens, the request the legitimate client makes, its memory and CPU."""

    def __init__(self, name, proc, port, path, token=None):
        self.name, self.proc, self.port, self.path, self.token = name, proc, port, path, token

    def memory_kib(self):
        return rss_kb(self.proc.pid) if self.name == "mailboxd" else tree_rss_kb(self.proc.pid)

    def cpu(self):
        return process_cpu(self.proc.pid) if self.name == "mailboxd" else tree_cpu(self.proc.pid)


def latencies(server, ca, requests, warmup=300):
    """ms of `requests` sequential GETs over one fresh keep-alive TLS connection, after `warmup` untimed ones; every
    answer must be 200."""
    api = harness.API(server.port, ca, timeout=15)
    samples = []
    try:
        for i in range(warmup + requests):
            start = time.perf_counter()
            status, _ = api.raw("GET", server.path, token=server.token)
            if status != 200:
                raise RuntimeError(f"connections: {server.name} answered {server.path} with HTTP {status}")
            if i >= warmup:
                samples.append(elapsed_ms(start))
    finally:
        api.reset()
    return samples


def climb(server, ca, counts, requests, workdir, first_source):
    """Holds 0, then each of `counts` idle connections against `server`, measuring at each; the steps and the
    climb's figures."""
    held = idle.IdleConnections(server.port, ca, counts[-1], workdir, first_source, label=server.name)
    steps, opening = [], {"opened": 0, "seconds": 0.0, "server_cpu": 0.0, "client_cpu": 0.0, "errors": {}}
    try:
        for count in (0,) + tuple(counts):
            if count:
                open_step(server, held, count, opening)
            state = held.check()
            samples = latencies(server, ca, requests)
            steps.append({"connections": state["open"], "asked": count, "dropped": state["closed"],
                          "p50_ms": round(percentile(samples, 50), 3), "p99_ms": round(percentile(samples, 99), 3),
                          "max_ms": round(max(samples), 2), "rss_kib": server.memory_kib()})
            log(f"  {server.name}: {state['open']:,} idle ({state['closed']} closed by the server): p50 "
                f"{steps[-1]['p50_ms']} ms, p99 {steps[-1]['p99_ms']} ms; RSS {steps[-1]['rss_kib']:,} KiB")
        final = held.check()
    finally:
        held.close()
    first = steps[0]
    for step in steps:
        step["p99_ratio"] = round(step["p99_ms"] / first["p99_ms"], 3)
        n = step["connections"]
        step["kib_per_connection"] = round((step["rss_kib"] - first["rss_kib"]) / n, 2) if n else None
    opening["accepts_per_s"] = opening["opened"] / opening["seconds"] if opening["seconds"] else 0.0
    opening["server_cpu_ms_per_accept"] = round(1000 * opening["server_cpu"] / max(1, opening["opened"]), 3)
    opening["client_cpu_ms_per_handshake"] = round(1000 * opening["client_cpu"] / max(1, opening["opened"]), 3)
    opening["held_at_end"] = final["open"]
    return steps, opening


def open_step(server, held, count, opening):
    """Opens connections up to `count`, adding the time, the server's CPU and the holders' CPU to `opening`."""
    cpu, clients = server.cpu(), [process_cpu(h.popen.pid) for h in held.holders]
    result = held.open_to(count)
    opening["server_cpu"] += server.cpu() - cpu
    opening["client_cpu"] += sum(process_cpu(h.popen.pid) for h in held.holders) - sum(clients)
    opening["opened"] += result["opened"]
    opening["seconds"] += result["seconds"]
    for key, value in result["errors"].items():
        opening["errors"][key] = opening["errors"].get(key, 0) + value
    if result["failed"]:
        log(f"  {server.name}: {result['failed']} of {count - held.held + result['opened']:,} connections failed: "
            f"{result['errors']}")


def start_mailboxd(env, limit):
    """mailboxd (no gateway) with --max-connections `limit`, one account and its session token."""
    cluster = env.cluster
    cluster.add_accounts([USER])
    cluster.sim_port = 9  # no gateway: nothing here signals
    cluster.start_mailboxd(extra=["--max-connections", str(limit)])
    token = cluster.api().login(USER, f"password-{USER}", "connections-bench")
    return Server("mailboxd", cluster.mailboxd, cluster.api_port, "/v1/mailboxes", token)


def rows(results, top, requests):
    ours, theirs = results["mailboxd"], results["nginx"]
    (m_steps, m_open), (n_steps, n_open) = ours, theirs
    m_top, n_top = m_steps[-1], n_steps[-1]
    m_first = next(s for s in m_steps if s["asked"] == COUNTS[0])
    n_first = next(s for s in n_steps if s["asked"] == COUNTS[0])
    out = [figure("connections-p99", f"Keep-alive GET p99 with {m_top['connections']:,} idle TLS connections ÷ with "
                  f"none, mailboxd (goal ≤ {P99_GOAL:g}; nginx {n_top['p99_ratio']})", "ms",
                  f"mailboxd, {m_top['connections']:,} idle", m_top["p99_ms"], "mailboxd, none",
                  m_steps[0]["p99_ms"], P99_GOAL, higher_is_better=False, nginx_ratio=n_top["p99_ratio"],
                  requests=requests, chart=False),
           figure("connections-flatness", f"Keep-alive GET p99 with {m_top['connections']:,} idle TLS connections ÷ "
                  f"with 1,000, mailboxd (flatness; goal ≤ {FLATNESS_GOAL:g}; nginx "
                  f"{round(n_top['p99_ms'] / n_first['p99_ms'], 3)})", "ms",
                  f"mailboxd, {m_top['connections']:,} idle", m_top["p99_ms"], "mailboxd, 1,000 idle",
                  m_first["p99_ms"], FLATNESS_GOAL, higher_is_better=False,
                  nginx_flatness=round(n_top["p99_ms"] / n_first["p99_ms"], 3), chart=False)]
    memory = figure("connections-memory", f"Memory per idle TLS connection, {m_top['connections']:,} connections "
                    f"(goal mailboxd ≤ {MEMORY_GOAL_KIB:g} KiB and ≤ {MEMORY_RATIO_GOAL:g}× nginx)", "KiB",
                    "mailboxd (RSS)", m_top["kib_per_connection"], "nginx (RSS, master and workers)",
                    n_top["kib_per_connection"], MEMORY_RATIO_GOAL, higher_is_better=False,
                    goal_kib=MEMORY_GOAL_KIB, chart=False)
    if m_top["kib_per_connection"] > MEMORY_GOAL_KIB:
        memory["met"] = False
        memory["finding"] = (f"connections: mailboxd holds {m_top['kib_per_connection']} KiB per idle TLS connection "
                             f"at {m_top['connections']:,} connections against the goal ≤ {MEMORY_GOAL_KIB:g} KiB "
                             f"(nginx {n_top['kib_per_connection']} KiB)")
    out.append(memory)
    out.append(figure("connections-accept-rate", f"TLS accepts/s while {top:,} clients connect (goal ≥ "
                      f"{ACCEPT_GOAL:g} of nginx)", "accepts/s", "mailboxd", m_open["accepts_per_s"], "nginx",
                      n_open["accepts_per_s"], ACCEPT_GOAL,
                      mailboxd_cpu_ms_per_accept=m_open["server_cpu_ms_per_accept"],
                      nginx_cpu_ms_per_accept=n_open["server_cpu_ms_per_accept"]))
    problems = [f"{name}: {opening['opened']:,} of {top:,} connections opened ({opening['errors']})"
                for name, (_, opening) in results.items() if opening["opened"] < top]
    problems += [f"{name}: {step['dropped']} connections closed by the server before {step['asked']:,} were held"
                 for name, (steps, _) in results.items() for step in steps if step["dropped"]]
    summary = {"benchmark": "connections-summary", "title": "Idle TLS connections against nginx",
               "requests": requests, "limit": top, "steps": {name: steps for name, (steps, _) in results.items()},
               "opening": {name: opening for name, (_, opening) in results.items()}, "problems": problems}
    if problems:
        summary["finding"] = "connections: " + "; ".join(problems)
    return out + [summary]


def print_figures(records, results):
    for name in SERVERS:
        steps, opening = results[name]
        for step in steps:
            memory = f", {step['kib_per_connection']} KiB each" if step["kib_per_connection"] is not None else ""
            log(f"  {name} {step['connections']:>6,} idle: p50 {step['p50_ms']} ms, p99 {step['p99_ms']} ms "
                f"(× {step['p99_ratio']} of none){memory}")
        log(f"  {name}: {opening['opened']:,} TLS accepts in {opening['seconds']:.1f} s, "
            f"{opening['accepts_per_s']:.0f}/s, {opening['server_cpu_ms_per_accept']} ms server CPU each "
            f"({opening['client_cpu_ms_per_handshake']} ms in the holders)")
    for r in records:
        if "ratio" in r:
            log(f"  {r['benchmark']}: {r['ours_label']} {r['ours']} {r['unit']}, {r['baseline_label']} "
                f"{r['baseline']} {r['unit']}: ratio {r['ratio']} (goal {r['goal_op']} {r['goal']}: "
                f"{'met' if r['met'] else 'MISSED'})")


def run(env):
    limit = connection_limit()
    counts = COUNTS + (limit - RESERVE,)
    requests = env.by_mode(2000, 5000)
    started = time.monotonic()
    results = {}
    ours = start_mailboxd(env, limit)
    results["mailboxd"] = climb(ours, env.ca, counts, requests, env.work, first_source=2)
    env.stop(ours.proc)
    nginx_proc, nginx_port = env.nginx(tls=True, connections=limit)
    theirs = Server("nginx", nginx_proc, nginx_port, "/status.json")
    results["nginx"] = climb(theirs, env.ca, counts, requests, env.work, first_source=12)
    env.stop(nginx_proc)
    records = rows(results, counts[-1], requests)
    print_figures(records, results)
    log(f"  connections took {time.monotonic() - started:.0f} s")
    for record in records:
        emit(record)
