"""streams: held JMAP event streams (`GET /jmap/eventsource?types=*&closeafter=no&ping=30`, what `mail-client --live`
holds) on mailboxd's HTTP/1.1 API, every one a TLS connection from holder processes (signalfetch.streams, several
127.0.0.x sources), and a change fanned out to them.

Each stream's latency runs from the commit to the kernel's receive time of its state event (SO_TIMESTAMPNS), so a
holder busy with other streams does not add to it. The commit is taken as the client learns of it: the kernel's
receive time of the LMTP transaction's first reply, which mailboxd sends once the message's deliveries are committed
(a stream's event may come a moment before it, which counts as less than nothing). Beside it, the same from just
before the message's text and final "." were sent, which holds the commit itself (the parse, the writes, the fsync,
and under load the wait for the writer): between the two lies commit → event.

- streams-fanout-account: 1,000 streams of one account, one delivery a round: the account's streams are woken once
  and its state read once for all of them.
- streams-fanout-accounts: 10,000 streams of 10,000 accounts, a round being a message to every account: 100 LMTP
  transactions of 100 recipients, over SESSIONS sessions at once (LMTP takes at most 100 recipients a message).

Goal: p99 ≤ 100 ms for both. Beside them: mailboxd's memory per held stream (RSS growth ÷ streams) and its CPU per
event (the deliveries' own included). The accounts and their sessions are made in the store before mailboxd starts
(`signalfetch-bench stream-accounts`): ten thousand sign-ins would be ten thousand scrypt hashes."""
import itertools
import socket
import struct
import subprocess
import threading
import time

from .. import log
from ..measure import latency_summary, process_cpu, rss_kb
from ..report import emit, latency_row, missed_events
from ..streams import CMSG_SPACE, SO_TIMESTAMPNS, EventStreams

PATH = "/jmap/eventsource?types=*&closeafter=no&ping=30"
GOAL_P99_MS = 100.0
RECIPIENTS = 100  # LMTP's most recipients of one message here (and RFC 5321's least a server must take)
SESSIONS = 4
MESSAGES = itertools.count()  # every message's bytes differ: the store takes the same bytes twice as one delivery
MESSAGE = ("From: sender@sender.test\r\nTo: list@example.test\r\nSubject: Fan-out\r\n"
           "Message-ID: <{id}@sender.test>\r\n\r\nOne change for every account.\r\n")


class LMTP:
    """One LMTP session (RFC 2033) to mailboxd: a message to up to RECIPIENTS accounts at a time. Replies are read
    with the kernel's receive time (SO_TIMESTAMPNS), which for a message's first reply is when the client learned
    of the commit."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no command waits for a delayed ACK
        self.buffer, self.arrived = b"", None
        self.reply()
        self.command("LHLO bench.test")

    def line(self):
        """One reply line, and the kernel time its first byte's read arrived."""
        while b"\r\n" not in self.buffer:
            data, ancdata, _, _ = self.sock.recvmsg(4096, CMSG_SPACE)
            if not data:
                raise RuntimeError("streams: LMTP: the server closed the session")
            if not self.buffer:
                self.arrived = kernel_time(ancdata)
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line, self.arrived

    def reply(self):
        """One reply (its last line), raising unless it is 2xx or 3xx; and the kernel time it arrived."""
        while True:
            line, arrived = self.line()
            if line[3:4] != b"-":
                if line[:1] not in (b"2", b"3"):
                    raise RuntimeError(f"streams: LMTP: {line.decode(errors='replace').strip()}")
                return line, arrived

    def command(self, text):
        self.sock.sendall(text.encode() + b"\r\n")
        return self.reply()

    def send(self, recipients, number):
        """One message to `recipients`: the wall time just before its text and final "." were sent (one write), and the kernel time its
        first reply arrived (LMTP answers each recipient once its delivery is committed)."""
        self.command("MAIL FROM:<sender@sender.test>")
        for user in recipients:
            self.command(f"RCPT TO:<{user}@example.test>")
        self.command("DATA")
        body = MESSAGE.format(id=number).encode() + b".\r\n"
        sent = time.time()
        self.sock.sendall(body)
        _, committed = self.reply()
        for _ in recipients[1:]:
            self.reply()
        return sent, committed

    def close(self):
        try:
            self.command("QUIT")
        except (OSError, RuntimeError):
            pass
        self.sock.close()


def kernel_time(ancdata):
    for level, kind, value in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            seconds, nanoseconds = struct.unpack("qq", value[:16])
            return seconds + nanoseconds / 1e9
    return time.time()


def seed(env, cluster, prefix, count):
    """`count` accounts PREFIX00000… with a session each, made in the store; [(username, token)]."""
    done = subprocess.run([env.bench, "stream-accounts", "--db", cluster.db, "--prefix", prefix, "--count",
                           str(count)], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"streams: stream-accounts failed: {done.stderr[-500:]}")
    pairs = [tuple(line.split(" ", 1)) for line in done.stdout.splitlines()]
    if len(pairs) != count:
        raise RuntimeError(f"streams: stream-accounts made {len(pairs)} accounts, not {count}")
    return pairs


def deliver(sessions, users):
    """A message to every one of `users`, RECIPIENTS to a transaction, the transactions shared out over the LMTP
    `sessions` running at once; {user: (the wall time just before its transaction's final ".", the kernel time of
    the transaction's first reply)}."""
    groups = [users[i:i + RECIPIENTS] for i in range(0, len(users), RECIPIENTS)]
    sent, errors = {}, []

    def work(index, session):
        try:
            for k in range(index, len(groups), len(sessions)):
                at = session.send(groups[k], next(MESSAGES))
                sent.update((user, at) for user in groups[k])
        except Exception as error:  # reported by the caller, not lost with the thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i, s)) for i, s in enumerate(sessions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return sent


def rounds(cluster, streams, users, accounts, count, sessions):
    """`count` rounds of a message to every account in `accounts`; the ms of each (stream, round) from just before
    its transaction's final "." and from the transaction's first reply, the streams that heard nothing in a round,
    and mailboxd's CPU over the rounds."""
    from_dot, from_reply, missing = [], [], 0
    cpu_before = process_cpu(cluster.mailboxd.pid)
    for _ in range(count):
        streams.arm()
        sent = deliver(sessions, accounts)
        times, closed = streams.await_events(30)
        if closed:
            raise RuntimeError(f"streams: mailboxd closed {closed} held streams")
        for user, at in zip(users, times):
            if at is None:
                missing += 1
            else:
                from_dot.append((at - sent[user][0]) * 1000)
                from_reply.append((at - sent[user][1]) * 1000)
    return from_dot, from_reply, missing, process_cpu(cluster.mailboxd.pid) - cpu_before


def step(env, cluster, label, pairs, accounts, count, sessions):
    """Streams for `pairs` (username, token) opened, `count` rounds of a message to every one of `accounts`; the
    step's samples (from the commit's reply) and figures."""
    before = rss_kb(cluster.mailboxd.pid)
    streams = EventStreams(cluster.api_port, cluster.ca, PATH, len(pairs), cluster.work, label=label)
    try:
        opened = streams.open([token for _, token in pairs])
        if opened["failed"]:
            raise RuntimeError(f"streams: {opened['failed']} of {len(pairs)} streams failed: {opened['errors']}")
        held_kib = (rss_kb(cluster.mailboxd.pid) - before) / len(pairs)
        users = [user for user, _ in pairs]
        rounds(cluster, streams, users, accounts, 1, sessions)  # warm-up: every stream has had an event
        before_commit, samples, missing, cpu = rounds(cluster, streams, users, accounts, count, sessions)
    finally:
        streams.close()
    events = count * len(pairs)
    figures = {"streams": len(pairs), "accounts": len(accounts), "rounds": count, "missing": missing,
               "open_seconds": round(opened["seconds"], 1), "rss_kib_per_stream": round(held_kib, 1),
               "mailboxd_cpu_us_per_event": round(cpu / events * 1e6, 1),
               "from_the_final_dot": latency_summary(before_commit) if before_commit else None,
               **latency_summary(samples)}
    log(f"streams, {label}: {figures}")
    return samples, figures


def row(name, title, samples, figures):
    result = latency_row(name, title, samples, GOAL_P99_MS, f"Event-stream fan-out ({figures['streams']:,} streams of "
                         f"{figures['accounts']:,} accounts):", **{k: v for k, v in figures.items()
                                                                   if not k.endswith("_ms") and k != "samples"})
    return missed_events(result, figures["missing"], "(stream, round) pairs heard no state event")


def run(env):
    crowd, fleet = 1000, env.by_mode(10000, 10000)
    count = env.by_mode(3, 5)
    cluster = env.topology("streams")
    sessions = []
    try:
        one = seed(env, cluster, "crowd", 1)
        many = seed(env, cluster, "fan", fleet)
        cluster.start_mailboxd(apns_port=9, extra=["--lmtp-listen", "127.0.0.1:0"])
        sessions = [LMTP(cluster.lmtp_port) for _ in range(SESSIONS)]
        crowd_samples, crowd_figures = step(env, cluster, "crowd", one * crowd, [one[0][0]], count * 5, sessions[:1])
        fleet_samples, fleet_figures = step(env, cluster, "fleet", many, [user for user, _ in many], count, sessions)
    finally:
        for session in sessions:
            session.close()
        cluster.close()
    emit(row("streams-fanout-account", f"One delivery → a state event on {crowd:,} event streams of one account: "
             "from the LMTP reply that says it is committed to each stream's event (kernel receive times)",
             crowd_samples,
             crowd_figures))
    emit(row("streams-fanout-accounts", f"A message to {fleet:,} accounts (LMTP, {RECIPIENTS} recipients a "
             f"transaction, {SESSIONS} sessions) → a state event on each account's stream: from its transaction's "
             "first LMTP reply (sent once committed) to the event (kernel receive times)", fleet_samples,
             fleet_figures))
