"""connections: idle TLS connections held against mailboxd up to its connection limit, and against nginx (Debian's
nginx-light with the same certificate and key: a TLS server block serving a small static file with keep-alive) in
the same run, the same counts for both: none (the baseline), 1,000, 5,000, 10,000 and the limit (mailboxd's
--max-connections, the hard open-file limit less 1,024, less a few places for the measuring client).

The connections come from holder processes (signalfetch.idle: at most 5,000 each, each from a loopback address of its
own), every handshake completed and the server verified against the topology's CA, then nothing sent. At each count:

- a legitimate client's latency: sequential small GETs (mailboxd: `GET /v1/mailboxes` with a session token; nginx:
  the static file) in rounds of ROUND, each on a fresh keep-alive TLS connection after a warm-up, and each followed by
  the same round against a twin of the server that holds no connections (a second mailboxd of its own topology, a
  second nginx): the twin is the server "at none" at the same moments of this shared machine, whose other work moves
  a p99 more than a few idle connections could. The figures: p99 at N ÷ p99 at none, the median of the rounds'
  ratios (at none itself, the two idle twins' ratio: the measurement's own noise), and the flatness, that ratio at
  the limit ÷ at 1,000. The plain quotient, p99 at N ÷ p99 measured earlier with none, is beside them;
- memory per idle connection: (the server's RSS at N − at none) ÷ N, mailboxd's own, nginx's summed over its master
  and workers (nginx allocates its connection table when a worker starts, so that part, a few hundred bytes a
  connection, is in its RSS at none already);
- then every held connection is looked at without blocking: one the server ended is reported, never counted.

TLS accepts per second: the connections opened ÷ the seconds spent opening them over the whole climb to the limit,
each server's CPU per accept beside it (the holders' handshakes cost CPU on the same cores, which bounds both rates).
Both servers end a connection that has sent no request after 60 s (mailboxd's idle timeout, nginx's
client_header_timeout), so a climb and its measurements stay well within that; each step records how long its oldest
connection had been held. Standard library only."""
import resource
import time

from .. import harness, idle, log
from ..measure import elapsed_ms, median, percentile, process_cpu, rss_kb, tree_cpu, tree_rss_kb
from ..report import emit, figure, paired

USER = "conn"
COUNTS = (1000, 5000, 10000)
ROUND = 250  # requests a latency round makes
RESERVE = 16  # places below mailboxd's limit left for the measuring client
IDLE_TIMEOUT = 60  # s: mailboxd's HTTP idle timeout, nginx's client_header_timeout
P99_GOAL, FLATNESS_GOAL, MEMORY_GOAL_KIB, MEMORY_RATIO_GOAL, ACCEPT_GOAL = 1.2, 1.1, 16.0, 2.0, 0.5
SERVERS = ("mailboxd", "nginx")


def connection_limit():
    """mailboxd's connection limit here: the hard open-file limit less the 1,024 descriptors it keeps for itself."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[1] - 1024


class Server:
    """One server: where it listens, the CA it is verified against, the request the legitimate client makes, its
    memory and CPU."""

    def __init__(self, name, proc, port, ca, path, token=None):
        self.name, self.proc, self.port, self.ca, self.path, self.token = name, proc, port, ca, path, token

    def memory_kib(self):
        return rss_kb(self.proc.pid) if self.name == "mailboxd" else tree_rss_kb(self.proc.pid)

    def cpu(self):
        return process_cpu(self.proc.pid) if self.name == "mailboxd" else tree_cpu(self.proc.pid)


def latencies(server, requests, warmup):
    """ms of `requests` sequential GETs over one fresh keep-alive TLS connection, after `warmup` untimed ones; every
    answer must be 200."""
    api = harness.API(server.port, server.ca, timeout=15)
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


def latency_step(server, twin, requests):
    """The legitimate client at one count: `requests` GETs against `server` in rounds of ROUND, each followed by a
    round against `twin`; the median round's p50 and p99 on each, every round's p99, and the median of the rounds'
    p99 ÷ the twin's."""
    ours, theirs = [], []
    for i in range(max(1, requests // ROUND)):
        warmup = 300 if i == 0 else 20
        ours.append(latencies(server, ROUND, warmup))
        theirs.append(latencies(twin, ROUND, warmup))
    p99s, twin_p99s = [percentile(r, 99) for r in ours], [percentile(r, 99) for r in theirs]
    return {"p50_ms": round(median([percentile(r, 50) for r in ours]), 3), "p99_ms": round(median(p99s), 3),
            "twin_p99_ms": round(median(twin_p99s), 3),
            "p99_ratio": round(median([a / b for a, b in zip(p99s, twin_p99s)]), 3),
            "round_p99_ms": [round(v, 3) for v in p99s], "twin_round_p99_ms": [round(v, 3) for v in twin_p99s],
            "max_ms": round(max(ms for r in ours for ms in r), 2)}


def climb(server, twin, counts, requests, workdir, first_source):
    """Holds 0, then each of `counts` idle connections against `server`, measuring at each; the steps and the
    climb's figures."""
    held = idle.IdleConnections(server.port, server.ca, counts[-1], workdir, first_source, label=server.name)
    steps, opening = [], {"opened": 0, "seconds": 0.0, "server_cpu": 0.0, "client_cpu": 0.0, "errors": {}}
    try:
        for count in (0,) + tuple(counts):
            if count:
                open_step(server, held, count, opening)
            step = {"asked": count, **latency_step(server, twin, requests), "rss_kib": server.memory_kib()}
            state = held.check()  # after the step's measurements: a connection the server ended meanwhile counts
            step.update(connections=state["open"], dropped=state["closed"],
                        oldest_s=round(time.monotonic() - opening["first"], 1) if count else 0.0)
            steps.append(step)
            log(f"  {server.name}: {state['open']:,} idle ({state['closed']} ended by the server): p50 "
                f"{step['p50_ms']} ms, p99 {step['p99_ms']} ms (rounds {step['round_p99_ms']}; the twin's "
                f"{step['twin_round_p99_ms']}); RSS {step['rss_kib']:,} KiB")
    finally:
        held.close()
    first = steps[0]
    for step in steps:
        step["plain_p99_ratio"] = round(step["p99_ms"] / first["p99_ms"], 3)
        n = step["connections"]
        step["kib_per_connection"] = round((step["rss_kib"] - first["rss_kib"]) / n, 2) if n else None
    opening["accepts_per_s"] = opening["opened"] / opening["seconds"] if opening["seconds"] else 0.0
    opening["server_cpu_ms_per_accept"] = round(1000 * opening["server_cpu"] / max(1, opening["opened"]), 3)
    opening["client_cpu_ms_per_handshake"] = round(1000 * opening["client_cpu"] / max(1, opening["opened"]), 3)
    opening.pop("first", None)  # a monotonic instant, meaningless in the results
    return steps, opening


def open_step(server, held, count, opening):
    """Opens connections up to `count`, adding the time, the server's CPU and the holders' CPU to `opening`."""
    cpu, clients = server.cpu(), [process_cpu(h.popen.pid) for h in held.holders]
    opening.setdefault("first", time.monotonic())
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


def start_mailboxd(cluster, extra=()):
    """mailboxd (no gateway) in `cluster`, one account and its session token."""
    cluster.add_accounts([USER])
    cluster.sim_port = 9  # no gateway: nothing here signals
    cluster.start_mailboxd(extra=list(extra))
    token = cluster.api().login(USER, f"password-{USER}", "connections-bench")
    return Server("mailboxd", cluster.mailboxd, cluster.api_port, cluster.ca, "/v1/mailboxes", token)


def rows(results, top, requests):
    (m_steps, m_open), (n_steps, n_open) = results["mailboxd"], results["nginx"]
    m_top, n_top = m_steps[-1], n_steps[-1]
    m_first = next(s for s in m_steps if s["asked"] == COUNTS[0])
    n_flat = round(n_top["p99_ratio"] / next(s for s in n_steps if s["asked"] == COUNTS[0])["p99_ratio"], 3)
    idle_label = f"mailboxd, {m_top['connections']:,} idle"
    flatness = figure("connections-flatness", f"Keep-alive GET p99 ÷ p99 at none, with {m_top['connections']:,} idle "
                      f"TLS connections ÷ with 1,000, mailboxd (flatness; goal ≤ {FLATNESS_GOAL:g}; nginx {n_flat})",
                      "×", idle_label, m_top["p99_ratio"], "mailboxd, 1,000 idle", m_first["p99_ratio"],
                      FLATNESS_GOAL, higher_is_better=False, nginx_flatness=n_flat, chart=False)
    flatness["ours"], flatness["baseline"] = m_top["p99_ratio"], m_first["p99_ratio"]  # ratios: not to one decimal
    out = [paired("connections-p99", f"Keep-alive GET p99 with {m_top['connections']:,} idle TLS connections ÷ "
                  f"with none (an idle twin, rounds interleaved), mailboxd (goal ≤ {P99_GOAL:g}; nginx "
                  f"{n_top['p99_ratio']}; two idle twins: mailboxd {m_steps[0]['p99_ratio']}, nginx "
                  f"{n_steps[0]['p99_ratio']})", "ms", idle_label, m_top["round_p99_ms"], "mailboxd twin, none",
                  m_top["twin_round_p99_ms"], P99_GOAL, higher_is_better=False, nginx_ratio=n_top["p99_ratio"],
                  plain_ratio=m_top["plain_p99_ratio"], nginx_plain_ratio=n_top["plain_p99_ratio"],
                  requests=requests, chart=False),
           flatness]
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
    problems += [f"{name}: {step['dropped']} of {step['asked']:,} connections ended by the server at that step "
                 f"(the oldest held {step['oldest_s']} s; the idle timeout is {IDLE_TIMEOUT} s)"
                 for name, (steps, _) in results.items() for step in steps if step["dropped"]]
    summary = {"benchmark": "connections-summary", "title": "Idle TLS connections against nginx",
               "requests": requests, "round": ROUND, "limit": top, "steps": {name: steps for name, (steps, _) in results.items()},
               "opening": {name: opening for name, (_, opening) in results.items()}, "problems": problems}
    if problems:
        summary["finding"] = "connections: " + "; ".join(problems)
    return out + [summary]


def print_figures(records, results):
    for name in SERVERS:
        steps, opening = results[name]
        for step in steps:
            memory = f", {step['kib_per_connection']} KiB each" if step["kib_per_connection"] is not None else ""
            log(f"  {name} {step['connections']:>6,} idle: p50 {step['p50_ms']} ms, p99 {step['p99_ms']} ms, × "
                f"{step['p99_ratio']} of the idle twin's (× {step['plain_p99_ratio']} of none before){memory}")
        log(f"  {name}: {opening['opened']:,} TLS accepts in {opening['seconds']:.1f} s, "
            f"{opening['accepts_per_s']:.0f}/s, {opening['server_cpu_ms_per_accept']} ms server CPU each "
            f"({opening['client_cpu_ms_per_handshake']} ms in the holders)")
    for r in records:
        if "ratio" in r:
            log(f"  {r['benchmark']}: {r['ours_label']} {r['ours']} {r['unit']}, {r['baseline_label']} "
                f"{r['baseline']} {r['unit']}: ratio {r['ratio']} (goal {r['goal_op']} {r['goal']}: "
                f"{'met' if r['met'] else 'MISSED'})")


def run(env):
    harness.stop_on_termination()  # SIGTERM too runs the finally blocks that stop the holders and servers
    limit = connection_limit()
    counts = COUNTS + (limit - RESERVE,)
    requests = env.by_mode(1500, 2000)
    started = time.monotonic()
    results = {}
    twin_cluster = env.topology("connections-twin")
    try:
        ours = start_mailboxd(env.cluster, ["--max-connections", str(limit)])
        twin = start_mailboxd(twin_cluster)
        results["mailboxd"] = climb(ours, twin, counts, requests, env.work, first_source=2)
    finally:
        twin_cluster.close()
    env.stop(ours.proc)
    nginx_proc, nginx_port = env.nginx(tls=True, connections=limit)
    twin_proc, twin_port = env.nginx(tls=True, name="nginx-twin")
    results["nginx"] = climb(Server("nginx", nginx_proc, nginx_port, env.ca, "/status.json"),
                             Server("nginx", twin_proc, twin_port, env.ca, "/status.json"), counts, requests,
                             env.work, first_source=12)
    env.stop(nginx_proc)
    env.stop(twin_proc)
    records = rows(results, counts[-1], requests)
    print_figures(records, results)
    log(f"  connections took {time.monotonic() - started:.0f} s")
    for record in records:
        emit(record)
