"""scale: durable deliveries/s on PostgreSQL (fsync and synchronous_commit on) from 32 concurrent senders, through 1
and 3 mailboxd instances, against pgbench running the same transaction (data/delivery.pgbench.sql) at the same
concurrency on the same server, with the CPU each side cost; `changes` latency in a large mailbox against a small
one; freshness on PostgreSQL against SQLite."""
import os
import re
import subprocess
import time

from .. import data_path, harness
from ..measure import (changes_floor, children_cpu, median, percentile, thread_activity, thread_activity_delta,
                       tree_cpu, wrk_figures)
from ..report import emit, figure, paired
from . import freshness as runs

PGBENCH = "/usr/lib/postgresql/15/bin/pgbench"
ACCOUNTS, DEVICES_PER_ACCOUNT, SENDERS = 32, 2, 32
# The goal for mailboxd's own CPU per delivery on PostgreSQL, through one instance.
CPU_GOAL_MS = 0.3


def start_delivery_load(cluster, users, per_account, label):
    """Adds the accounts, starts three mailboxd with no gateway (signals wait in the outbox, retried with backoff, so
    the devices stay registered and every delivery upserts their rows, as the pgbench transaction does) and
    registers `per_account` production devices per account; returns wrk's environment for data/deliveries.lua."""
    cluster.add_accounts(users)
    cluster.sim_port = 9
    for index in range(3):
        cluster.start_instance(index)
    cluster.register_devices(users, per_account, label)
    return cluster.delivery_load_env(users)


def wrk_deliveries(ports, senders, seconds, wrk_env, label):
    """Deliveries/s with `senders` connections spread over the instances on `ports` (one wrk each, running
    data/deliveries.lua); every delivery must be accepted."""
    share = [senders // len(ports) + (1 if i < senders % len(ports) else 0) for i in range(len(ports))]
    procs = [subprocess.Popen(
        ["wrk", "-t1", f"-c{c}", f"-d{seconds}s", "-s", data_path("deliveries.lua"), f"https://127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=wrk_env)
        for port, c in zip(ports, share)]
    total, errors = 0.0, 0
    for proc in procs:
        out, err = proc.communicate(timeout=seconds + 60)
        figures = wrk_figures(out)
        if figures["rate"] is None:
            raise RuntimeError(f"{label}: wrk failed: {err[-300:]} {out[-300:]}")
        total += figures["rate"]
        errors += figures["non2xx"]
    if errors:
        raise RuntimeError(f"{label}: {errors} deliveries were refused")
    return total


class CpuLedger:
    """Deliveries and the CPU seconds they cost (mailboxd, the PostgreSQL server, the load generator), per side,
    summed over every round."""

    def __init__(self, cluster, seconds):
        self.cluster, self.seconds = cluster, seconds
        self.postmaster = cluster.postmaster_pid()
        self.totals = {}  # key → [deliveries, seconds measured, mailboxd, server, load generator]
        self.threads = {}  # key → {thread group: [CPU seconds, context switches]}, for one instance

    def instances_cpu(self, ports):
        return sum(self.cluster.instances[self.cluster.ports.index(p)].cpu_seconds() for p in ports)

    def measure(self, key, ports, work):
        """Runs `work()` (returning deliveries/s) and books its CPU under `key`."""
        pid = self.cluster.instances[self.cluster.ports.index(ports[0])].pid if len(ports) == 1 else None
        threads0 = thread_activity(pid) if pid else {}
        ours0, server0, load0 = self.instances_cpu(ports), tree_cpu(self.postmaster), children_cpu()
        rate = work()
        spent = (self.instances_cpu(ports) - ours0, tree_cpu(self.postmaster) - server0, children_cpu() - load0)
        totals = self.totals.setdefault(key, [0.0] * 5)
        for i, value in enumerate((rate * self.seconds, self.seconds, *spent)):
            totals[i] += value
        if pid:
            groups = self.threads.setdefault(key, {})
            for name, (cpu, switches) in thread_activity_delta(threads0, thread_activity(pid)).items():
                total = groups.setdefault(name, [0.0, 0])
                total[0], total[1] = total[0] + cpu, total[1] + switches
        return rate

    def by_thread(self, key):
        """mailboxd's CPU (ms) and context switches per delivery by thread group, busiest first."""
        count = self.totals[key][0]
        return {THREAD_ROLES.get(name, name): {"cpu_ms": round(cpu / count * 1000, 3),
                                               "switches": round(switches / count, 2)}
                for name, (cpu, switches) in sorted(self.threads.get(key, {}).items(), key=lambda i: -i[1][0])
                if cpu / count * 1000 >= 0.001}

    def details(self, key, cores):
        """CPU per delivery over every round, the rate the cores allow at that cost, and how much of it the rounds
        reached (the same intervals: 1.0 means every core was busy with these processes)."""
        count, measured, ours_cpu, server, load = self.totals[key]
        per = (ours_cpu + server + load) / count
        rate = count / measured
        return {"cpu_ms_per_delivery": {"mailboxd": round(ours_cpu / count * 1000, 3),
                                        "postgres": round(server / count * 1000, 3),
                                        "load_generator": round(load / count * 1000, 3)},
                "cpu_bound_per_s": round(cores / per, 1), "mean_rate_per_s": round(rate, 1),
                "cpu_utilization": round(rate * per / cores, 3)}


# What each of mailboxd's thread groups does for a delivery (the names as the kernel shows them).
THREAD_ROLES = {
    "mailbox-pg": "PostgreSQL connections (the transaction's statements, libpq, its round trips)",
    "MHD-worker": "libmicrohttpd (TLS, HTTP/1.1)",
    "oot.default-qos": "Swift's cooperative pool (async handlers, the dispatcher)",
    "-qos.overcommit": "libdispatch's overcommit threads",
    "HTTP2Client I/O": "HTTP2Client (signals to apns-sim)",
    "pg-listen": "LISTEN for other instances' signals",
}


def pgbench(cluster, seconds):
    out = subprocess.run(
        [PGBENCH, "-n", "-c", str(SENDERS), "-j", "2", "-T", str(seconds), "-D", f"accounts={ACCOUNTS}",
         "-f", data_path("delivery.pgbench.sql"), cluster.database], capture_output=True, text=True,
        timeout=seconds + 60)
    tps = re.search(r"tps = ([\d.]+)", out.stdout)
    if out.returncode != 0 or not tps:
        raise RuntimeError(f"scale: pgbench failed: {out.stderr[-500:]}")
    return float(tps.group(1))


def cpu_finding(record, label, details, base_cpu, cores):
    c = details["cpu_ms_per_delivery"]
    return (f"{label}: {record['ratio']:.2f} of pgbench. CPU bound, measured: a delivery costs "
            f"{c['mailboxd']:.2f} ms of mailboxd CPU (TLS, HTTP, JSON, the RFC 5322 message it composes and "
            f"hashes, the store), {c['postgres']:.2f} ms of the server's and {c['load_generator']:.2f} ms of "
            f"wrk's, so {cores} cores allow at most {details['cpu_bound_per_s']:.0f}/s, and the rounds averaged "
            f"{details['mean_rate_per_s']:.0f}/s ({details['cpu_utilization']:.0%} of the cores); pgbench's "
            f"transaction costs {base_cpu['cpu_ms_per_delivery']['postgres']:.2f} + "
            f"{base_cpu['cpu_ms_per_delivery']['load_generator']:.2f} ms (at most "
            f"{base_cpu['cpu_bound_per_s']:.0f}/s). On these 2 shared cores, 3 instances only add processes "
            "to the same CPU.")


def throughput(env, cluster, wrk_env):
    """1 and 3 instances against pgbench, rounds interleaved; one figure each."""
    seconds, rounds = env.by_mode(10, 30), 3
    ledger = CpuLedger(cluster, seconds)

    def through(ports):
        return ledger.measure(len(ports), ports, lambda: wrk_deliveries(ports, SENDERS, seconds, wrk_env, "scale"))

    through(cluster.ports[:1])  # warm-up: connections, caches, the first checkpoint
    one, three, base = [], [], []
    for _ in range(rounds):
        base.append(ledger.measure("pgbench", [], lambda: pgbench(cluster, seconds)))
        one.append(through(cluster.ports[:1]))
        three.append(through(cluster.ports))
    cores = os.cpu_count() or 1
    base_cpu = ledger.details("pgbench", cores)
    for key, rates, label in ((1, one, "1 mailboxd"), (3, three, "3 mailboxd")):
        details = ledger.details(key, cores)
        record = paired(f"scale-{key}", f"Durable deliveries/s on PostgreSQL, {SENDERS} senders, {label}",
                        "deliveries/s", f"mailboxd ({label}, POST /v1/deliveries over TLS)", rates,
                        "pgbench, the same transaction", base, 0.7, accounts=ACCOUNTS,
                        devices=ACCOUNTS * DEVICES_PER_ACCOUNT, cpu=details, pgbench_cpu=base_cpu)
        if not record["met"]:
            record["finding"] = cpu_finding(record, label, details, base_cpu, cores)
        emit(record)
    emit(cpu_row(ledger.details(1, cores), ledger.by_thread(1)))


def cpu_row(details, threads):
    """mailboxd's CPU per delivery through one instance against the goal, with where it goes by thread."""
    ms = details["cpu_ms_per_delivery"]["mailboxd"]
    record = {"benchmark": "scale-cpu", "title": "mailboxd CPU per delivery on PostgreSQL (1 instance, "
              f"{SENDERS} senders, {DEVICES_PER_ACCOUNT} devices per account)", "cpu_ms_per_delivery": ms,
              "goal_ms": CPU_GOAL_MS, "met": ms <= CPU_GOAL_MS, "by_thread": threads}
    if not record["met"]:
        parts = "; ".join(f"{t['cpu_ms']:.3f} ms and {t['switches']:.1f} context switches in {name}"
                          for name, t in threads.items())
        record["finding"] = (f"mailboxd CPU per delivery on PostgreSQL: {ms:.3f} ms misses the goal ≤ {CPU_GOAL_MS} ms. "
                             f"By thread, per delivery: {parts}. Scripts/bench profile delivery --postgres shows "
                             "each group's frames.")
    return record


def changes_median(cluster, name, size):
    """Median ms of `changes` for 100 new messages in a mailbox of `size` messages (data/bulk-messages.sql)."""
    user = f"changes-{name}"
    cluster.add_accounts([user])
    subprocess.run(["psql", cluster.database, "-q", "-v", "ON_ERROR_STOP=1", "-v", f"user={user}", "-v",
                    f"size={size}", "-v", f"prefix=bulk-{name}-", "-f", data_path("bulk-messages.sql")],
                   check=True, capture_output=True, text=True)
    api = cluster.api()  # a fresh connection: the last one idled through the bulk insert
    token = api.login(user, f"password-{user}", "bench")
    _, listing = api.call("GET", "/v1/messages?limit=1", token=token)
    since = listing["state"]
    for i in range(100):
        api.call("POST", "/v1/deliveries", token=cluster.delivery_token,
                 body={"to": user, "from": "x@example.com", "subject": f"New {i}", "body": "b"})
    samples = []
    for _ in range(60):
        t0 = time.perf_counter()
        status, page = api.call("GET", f"/v1/changes?since={since}&max=500", token=token)
        samples.append((time.perf_counter() - t0) * 1000)
        if status != 200 or len(page["created"]) != 100:
            raise RuntimeError(f"scale: changes returned HTTP {status}")
    return median(samples)


def changes_latency(env, cluster):
    """changes for 100 new messages: a mailbox of `large` messages against one of 1,000."""
    large = env.by_mode(200_000, 1_000_000)
    latencies = {name: changes_median(cluster, name, size) for name, size in (("small", 1000), ("large", large))}
    emit(figure("scale-changes", f"changes for 100 new messages on PostgreSQL: {large:,}-message mailbox vs 1,000",
                "ms (median)", f"{large:,} messages", latencies["large"], "1,000 messages", latencies["small"],
                2.0, higher_is_better=False))


def run(env):
    cluster = harness.ScaleCluster(env.bin, prefix="signalfetch-bench-scale-")
    users = runs.users(ACCOUNTS)
    try:
        wrk_env = start_delivery_load(cluster, users, DEVICES_PER_ACCOUNT, "scale")
        throughput(env, cluster, wrk_env)
        changes_latency(env, cluster)
    finally:
        cluster.close()
    emit(scale_freshness(env))


def engine_freshness(env, engine, users, per_account, deliveries, rate):
    """Freshness on one store, with the parts of its path: one /v1/changes round trip (what a device does after a
    signal)."""
    cluster = (harness.ScaleCluster(env.bin, instances=1, prefix="signalfetch-bench-fresh-") if engine ==
               "postgresql" else env.topology("fresh"))
    try:
        cluster.add_accounts(users)
        cluster.start_apns_sim()
        cluster.start_instance(0) if engine == "postgresql" else cluster.start_mailboxd()
        _, _, samples, _ = runs.run(cluster, users, per_account, deliveries, rate, 11, f"scale freshness ({engine})")
        floor, _ = changes_floor(cluster.api(), users[0])
        return {"freshness_p50_ms": round(percentile(samples, 50), 2),
                "freshness_p99_ms": round(percentile(samples, 99), 2),
                "changes_round_trip_p50_ms": round(percentile(floor, 50), 2),
                "changes_round_trip_p99_ms": round(percentile(floor, 99), 2)}, percentile(samples, 99)
    finally:
        cluster.close()


def scale_freshness(env, accounts=25, per_account=2, deliveries=500, rate=50.0):
    """Freshness (delivery 201 → the message in the device's cache) with the store on PostgreSQL, against the same
    load with the store in SQLite, in the same run."""
    users = runs.users(accounts)
    p99, parts = {}, {}
    for engine in ("sqlite", "postgresql"):
        parts[engine], p99[engine] = engine_freshness(env, engine, users, per_account, deliveries, rate)
    record = figure("scale-freshness", f"Freshness p99, {accounts * per_account} devices, {rate:.0f} deliveries/s: "
                    "PostgreSQL vs SQLite", "ms (p99)", "store on PostgreSQL", p99["postgresql"], "store in SQLite",
                    p99["sqlite"], 2.0, higher_is_better=False, parts=parts)
    if not record["met"]:
        pg, lite = parts["postgresql"], parts["sqlite"]
        record["finding"] = (
            f"Freshness p99 on PostgreSQL is {record['ratio']:.2f}× SQLite's ({pg['freshness_p99_ms']} vs "
            f"{lite['freshness_p99_ms']} ms; p50 {pg['freshness_p50_ms']} vs {lite['freshness_p50_ms']} ms). One "
            f"/v1/changes round trip, the device's part of the path, is p50 {pg['changes_round_trip_p50_ms']} vs "
            f"{lite['changes_round_trip_p50_ms']} ms and p99 {pg['changes_round_trip_p99_ms']} vs "
            f"{lite['changes_round_trip_p99_ms']} ms: every store call is network round trips (a read is its queries, "
            "the first with the BEGIN, and the COMMIT; a delivery two) instead of a function call into SQLite.")
    return record
