"""ingest: LMTP deliveries/s from Postfix's smtp-source (20 sessions, connections reused) into mailboxd at
synchronous=FULL, against the same load into smtp-sink -L (an LMTP server that stores nothing), rounds interleaved
so both sides see the same moments of the machine; and the same mailboxd at NORMAL (no fsync per commit). Each run
also gives the server's and smtp-source's CPU per message (/proc, getrusage): on two cores shared by both, the
ratio cannot pass what smtp-sink and its smtp-source cost together against what mailboxd and its smtp-source do."""
import shutil
import subprocess
import time

from .. import harness
from ..measure import children_cpu, median, process_cpu
from ..report import emit, figure

SESSIONS, SIZE = 20, 4096


def lmtp_mailboxd(env, label, synchronous):
    """A mailboxd with one account, `bench`, taking LMTP; (cluster, LMTP port)."""
    cluster = env.topology(label)
    cluster.add_accounts(["bench"])
    cluster.sim_port = 9  # no gateway
    cluster.start_mailboxd(extra=["--lmtp-listen", "127.0.0.1:0", "--synchronous", synchronous])
    return cluster, cluster.lmtp_port


class Run:
    """One smtp-source run: messages/s, and the server's and smtp-source's CPU per message in ms."""

    def __init__(self, rate, server_ms, client_ms):
        self.rate, self.server_ms, self.client_ms = rate, server_ms, client_ms

    @property
    def cpu_ms(self):
        return self.server_ms + self.client_ms


def smtp_source(port, count, server_pid=None):
    """One smtp-source -L run of `count` messages to `port` (the server's CPU read when `server_pid` is given)."""
    server_before, client_before = process_cpu(server_pid) if server_pid else 0, children_cpu()
    start = time.monotonic()
    done = subprocess.run(
        ["smtp-source", "-L", "-s", str(SESSIONS), "-m", str(count), "-l", str(SIZE), "-d", "-f",
         "sender@sender.test", "-t", "bench@example.test", "-M", "client.test", f"127.0.0.1:{port}"],
        capture_output=True, text=True, timeout=600)
    elapsed = time.monotonic() - start
    if done.returncode != 0:
        raise RuntimeError(f"smtp-source failed: {done.stderr[-500:]}")
    server = (process_cpu(server_pid) - server_before) if server_pid else 0
    return Run(count / elapsed, 1000 * server / count, 1000 * (children_cpu() - client_before) / count)


def stored(cluster):
    return int(subprocess.run(["sqlite3", cluster.db, "SELECT count(*) FROM messages"], capture_output=True,
                              text=True, check=True).stdout.strip())


def measure_rounds(full, normal, sink, count, rounds):
    """Interleaved rounds: (mailboxd at FULL, smtp-sink, mailboxd at NORMAL), each a list of ``Run``."""
    smtp_source(full[1], count)  # warm-up: the file, the caches, the page cache
    smtp_source(normal[1], count)
    ours, sinks, normals = [], [], []
    for _ in range(rounds):
        sinks.append(smtp_source(sink[1], count, sink[0].pid))
        ours.append(smtp_source(full[1], count, full[0].mailboxd.pid))
        normals.append(smtp_source(normal[1], count, normal[0].mailboxd.pid))
    expected = count * (rounds + 1)
    if stored(full[0]) != expected:
        raise RuntimeError(f"ingest: {stored(full[0])} messages stored, {expected} acknowledged")
    return ours, sinks, normals


def cpu_bound(ours, sinks):
    """The ratio two shared cores allow: smtp-sink's and its smtp-source's CPU per message against mailboxd's and
    its smtp-source's (medians over the rounds)."""
    return median([r.cpu_ms for r in sinks]) / median([r.cpu_ms for r in ours])


def finding(ours, sinks, normals):
    ours_median, sink_median = median([r.rate for r in ours]), median([r.rate for r in sinks])
    normal_median = median([r.rate for r in normals])
    if ours_median / sink_median >= 0.5:
        return None
    ours_ms, sink_ms = median([r.server_ms for r in ours]), median([r.server_ms for r in sinks])
    cause = (f"the fsync is not what bounds it: the CPU per message is. mailboxd spends {ours_ms:.3f} ms a message "
             f"(the parse, the protocol on one event loop, the store's writes and the hand-off to the writer and "
             f"back; `Scripts/bench profile ingest` shows where) against smtp-sink's {sink_ms:.3f} ms, which stores "
             f"nothing; with smtp-source's own CPU on the same two cores that bounds the ratio at "
             f"{cpu_bound(ours, sinks):.2f}"
             if normal_median < 1.25 * ours_median else "the fsync per group commit bounds it")
    return (f"LMTP ingest reaches {ours_median / sink_median:.2f} of smtp-sink -L at FULL and "
            f"{normal_median / sink_median:.2f} without an fsync per commit (NORMAL, same run): {cause}.")


def run(env):
    count, rounds = env.by_mode(2000, 10000), 3
    for tool in ("smtp-source", "smtp-sink"):
        if not shutil.which(tool):
            raise SystemExit(f"ingest: {tool} is missing (Debian postfix; Scripts/bootstrap installs it)")
    clusters = []
    try:
        full = lmtp_mailboxd(env, "ingest", "FULL")
        clusters.append(full[0])
        # The same server without an fsync per commit (WAL at NORMAL syncs at checkpoints only): what is left of
        # the cost is CPU — parsing, the protocol, the store's SQL — which shows what bounds the FULL figure.
        normal = lmtp_mailboxd(env, "ingest-normal", "NORMAL")
        clusters.append(normal[0])
        sink_port = harness.free_port()
        sink = env.start("smtp-sink", ["smtp-sink", "-L", "-u", "postfix", f"127.0.0.1:{sink_port}", "256"])
        harness.wait_port(sink_port, proc=sink)
        ours, sinks, normals = measure_rounds(full, normal, (sink, sink_port), count, rounds)
        transactions = full[0].metric("mailboxd_store_transactions_total")
        writes = full[0].metric("mailboxd_store_writes_total")
        total = stored(full[0])
    finally:
        for cluster in clusters:
            cluster.close()
    ours_median, sink_median = median([r.rate for r in ours]), median([r.rate for r in sinks])
    normal_median = median([r.rate for r in normals])
    ratios = [a.rate / b.rate for a, b in zip(ours, sinks)]
    emit(figure(
        "ingest", f"LMTP ingest: {count} messages of {SIZE} B from smtp-source -L, {SESSIONS} sessions",
        "messages/s", "mailboxd --lmtp-listen (synchronous=FULL, parsed, raw kept)", ours_median,
        "smtp-sink -L (stores nothing)", sink_median, 0.5,
        rounds=[{"mailboxd": round(a.rate, 1), "smtp_sink": round(b.rate, 1), "ratio": round(a.rate / b.rate, 3)}
                for a, b in zip(ours, sinks)],
        cpu_ms_per_message={"mailboxd": round(median([r.server_ms for r in ours]), 3),
                            "smtp_sink": round(median([r.server_ms for r in sinks]), 3),
                            "smtp_source_to_mailboxd": round(median([r.client_ms for r in ours]), 3),
                            "smtp_source_to_smtp_sink": round(median([r.client_ms for r in sinks]), 3)},
        cpu_bound=round(cpu_bound(ours, sinks), 3),
        spread=round(max(ratios) - min(ratios), 3), stored=total,
        writes_per_transaction=round(writes / transactions, 1) if transactions else None,
        normal_median=round(normal_median, 1), normal_ratio=round(normal_median / sink_median, 3),
        finding=finding(ours, sinks, normals)))
