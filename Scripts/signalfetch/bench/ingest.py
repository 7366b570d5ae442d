"""ingest: LMTP deliveries/s from Postfix's smtp-source (20 sessions, connections reused) into mailboxd at
synchronous=FULL, against the same load into smtp-sink -L (an LMTP server that stores nothing), rounds interleaved
so both sides see the same moments of the machine; and the same mailboxd at NORMAL (no fsync per commit)."""
import shutil
import subprocess
import time

from .. import harness
from ..measure import median
from ..report import emit, figure

SESSIONS, SIZE = 20, 4096


def lmtp_mailboxd(env, label, synchronous):
    """A mailboxd with one account, `bench`, taking LMTP; (cluster, LMTP port)."""
    cluster = env.topology(label)
    cluster.add_accounts(["bench"])
    cluster.sim_port = 9  # no gateway
    lmtp = harness.free_port()
    cluster.start_mailboxd(extra=["--lmtp-listen", f"127.0.0.1:{lmtp}", "--synchronous", synchronous])
    harness.wait_port(lmtp, proc=cluster.mailboxd)
    return cluster, lmtp


def smtp_source(port, count):
    """Messages/s of one smtp-source -L run of `count` messages to `port`."""
    start = time.monotonic()
    done = subprocess.run(
        ["smtp-source", "-L", "-s", str(SESSIONS), "-m", str(count), "-l", str(SIZE), "-d", "-f",
         "sender@sender.test", "-t", "bench@example.test", "-M", "client.test", f"127.0.0.1:{port}"],
        capture_output=True, text=True, timeout=600)
    elapsed = time.monotonic() - start
    if done.returncode != 0:
        raise RuntimeError(f"smtp-source failed: {done.stderr[-500:]}")
    return count / elapsed


def stored(cluster):
    return int(subprocess.run(["sqlite3", cluster.db, "SELECT count(*) FROM messages"], capture_output=True,
                              text=True, check=True).stdout.strip())


def measure_rounds(env, full, normal, sink_port, count, rounds):
    smtp_source(full[1], count)  # warm-up: the file, the caches, the page cache
    smtp_source(normal[1], count)
    ours, sink_rates, normal_rates = [], [], []
    for _ in range(rounds):
        sink_rates.append(smtp_source(sink_port, count))
        ours.append(smtp_source(full[1], count))
        normal_rates.append(smtp_source(normal[1], count))
    expected = count * (rounds + 1)
    if stored(full[0]) != expected:
        raise RuntimeError(f"ingest: {stored(full[0])} messages stored, {expected} acknowledged")
    return ours, sink_rates, normal_rates


def finding(ours_median, sink_median, normal_median):
    if ours_median / sink_median >= 0.5:
        return None
    cause = ("the fsync is not what bounds it: the CPU per message is (parse, the protocol, the store, and the "
             "hand-off from a session's thread to the writer and back, on 2 cores shared with smtp-source; "
             "`Scripts/bench profile ingest` shows where)"
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
        ours, sink_rates, normal_rates = measure_rounds(env, full, normal, sink_port, count, rounds)
        transactions = full[0].metric("mailboxd_store_transactions_total")
        writes = full[0].metric("mailboxd_store_writes_total")
        total = stored(full[0])
    finally:
        for cluster in clusters:
            cluster.close()
    ours_median, sink_median, normal_median = median(ours), median(sink_rates), median(normal_rates)
    ratios = [a / b for a, b in zip(ours, sink_rates)]
    emit(figure(
        "ingest", f"LMTP ingest: {count} messages of {SIZE} B from smtp-source -L, {SESSIONS} sessions",
        "messages/s", "mailboxd --lmtp-listen (synchronous=FULL, parsed, raw kept)", ours_median,
        "smtp-sink -L (stores nothing)", sink_median, 0.5,
        rounds=[{"mailboxd": round(a, 1), "smtp_sink": round(b, 1), "ratio": round(a / b, 3)}
                for a, b in zip(ours, sink_rates)],
        spread=round(max(ratios) - min(ratios), 3), stored=total,
        writes_per_transaction=round(writes / transactions, 1) if transactions else None,
        normal_median=round(normal_median, 1), normal_ratio=round(normal_median / sink_median, 3),
        finding=finding(ours_median, sink_median, normal_median)))
