"""Where a message's CPU goes: a CPU profile of the release mailboxd under load on one path, with the CPU per
message from /proc.

Usage: python3 -m signalfetch.profile PATH [--seconds S] [--out DIR] [--postgres] [--console] [--otlp]
PATH: delivery (POST /v1/deliveries over TLS, 16 connections, no devices), changes (GET /v1/changes over TLS, one
new message each), signal (deliveries to accounts with two apns-sim devices each: the dispatcher and the HTTP/2
client too), ingest (LMTP from Postfix's smtp-source, 20 sessions). The store is SQLite at FULL, or with --postgres
a throwaway PostgreSQL (Scripts/postgres-instance) the one mailboxd talks to over loopback. The load
is wrk with data/deliveries.lua or data/changes.lua, or smtp-source.

Records with `perf record -g` (frame pointers) at 999 Hz on mailboxd only, demangles Swift symbols with
`swift demangle`, and writes into DIR (default bench-results):
  profile-NAME.txt     CPU per message, the share by component (TLS, HTTP, JSON, SQLite, MIME, crypto, the Swift
                       runtime, libc, the kernel, our code), CPU and context switches per message by thread
                       (the hand-offs), and the top frames by self and by total time
  profile-NAME.folded  the folded stacks (for any flame-graph tool)
  profile-NAME.svg     a flame graph
and prints one JSON line with the figures. NAME is PATH, with -postgres, -console and -otlp when those are given
(--otlp: traces exported to an OTLP receiver on this machine that counts and drops them, as the console bench's).
"""
import argparse
import collections
import html
import json
import os
import re
import shutil
import subprocess
import sys
import time

from . import data_path, harness
from .bench.console import Collector
from .measure import process_cpu, thread_activity, thread_activity_delta

# Components by shared object (or, for our binary and Foundation, by symbol).
COMPONENTS = [
    ("TLS (GnuTLS, nettle, gmp)", re.compile(r"libgnutls|libnettle|libhogweed|libgmp|libtasn1|libp11")),
    ("HTTP/1.1 (libmicrohttpd)", re.compile(r"libmicrohttpd")),
    ("HTTP/2 (nghttp2)", re.compile(r"libnghttp2")),
    ("SQLite", re.compile(r"libsqlite3")),
    ("MIME (GMime, GLib)", re.compile(r"libgmime|libglib|libgobject|libgio")),
    ("OpenSSL (crypto, TLS client)", re.compile(r"libcrypto|libssl")),
    ("libcurl", re.compile(r"libcurl")),
    ("Foundation (JSON, Data, String bridging)", re.compile(r"libFoundation|libswiftFoundation|lib_FoundationICU")),
    ("Swift runtime (retain/release, allocation, generics)", re.compile(r"libswiftCore|libswift_Concurrency|libdispatch|libBlocksRuntime")),
    ("libc (malloc, memcpy, locks)", re.compile(r"libc\.so|libc-|libpthread|ld-linux")),
    ("kernel (syscalls, network, disk)", re.compile(r"kernel|\[unknown\]|vmlinux")),
]


def component(dso):
    for name, pattern in COMPONENTS:
        if pattern.search(dso):
            return name
    if dso.endswith("mailboxd"):
        return "mailboxd's own code"
    return "other: " + os.path.basename(dso)


def parse_perf(script_text):
    """Samples from `perf script`: each a list of (symbol, dso), leaf first."""
    samples, stack = [], []
    for line in script_text.splitlines():
        if not line.strip():
            if stack:
                samples.append(stack)
            stack = []
            continue
        if line[0] not in " \t":
            continue  # the sample's header line
        parts = line.strip().split(None, 1)
        if len(parts) < 2:
            continue
        rest = parts[1]
        match = re.match(r"(.*) \((.*)\)$", rest)
        symbol, dso = (match.group(1), match.group(2)) if match else (rest, "?")
        symbol = re.sub(r"\+0x[0-9a-f]+$", "", symbol)
        stack.append((symbol, dso))
    if stack:
        samples.append(stack)
    return samples


def demangle(symbols):
    swift = shutil.which("swift-demangle") or "/opt/swift/usr/bin/swift-demangle"
    names = sorted(symbols)
    if not os.path.exists(swift):
        return {name: name for name in names}
    out = subprocess.run([swift, "--simplified", "--compact"], input="\n".join(names), capture_output=True,
                         text=True).stdout.splitlines()
    return {name: (out[i] if i < len(out) and out[i] else name)[:160] for i, name in enumerate(names)}


def flame_svg(folded, path, title):
    """A minimal flame graph: one rectangle per frame, widths by samples, roots at the bottom."""
    tree = {"name": "all", "value": 0, "children": {}}
    for stack, count in folded.items():
        node = tree
        node["value"] += count
        for frame in stack.split(";"):
            node = node["children"].setdefault(frame, {"name": frame, "value": 0, "children": {}})
            node["value"] += count
    width, row = 1600, 16

    def depth(node):
        return 1 + max((depth(c) for c in node["children"].values()), default=0)

    levels = depth(tree)
    height = levels * row + 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="monospace" '
             f'font-size="11"><text x="10" y="20" font-size="14">{html.escape(title)}</text>']

    def draw(node, x, level, total):
        w = width * node["value"] / total
        if w < 0.5:
            return
        y = height - (level + 1) * row
        hue = (hash(node["name"].split(" ")[0]) % 40) + 10
        label = html.escape(node["name"])
        parts.append(f'<g><title>{label} ({node["value"]} samples, {100 * node["value"] / total:.1f}%)</title>'
                     f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row - 1}" fill="hsl({hue},80%,60%)"/>')
        if w > 40:
            parts.append(f'<text x="{x + 3:.1f}" y="{y + 12}">{html.escape(node["name"][:int(w / 7)])}</text>')
        parts.append("</g>")
        child_x = x
        for child in sorted(node["children"].values(), key=lambda c: c["name"]):
            draw(child, child_x, level + 1, total)
            child_x += width * child["value"] / total

    draw(tree, 0, 0, max(1, tree["value"]))
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts))


class Target:
    """mailboxd (SQLite at FULL, or on a throwaway PostgreSQL) with 16 accounts, ready for load on one path."""

    def __init__(self, args, label, otlp=None):
        self.path, self.postgres, self.otlp = args.path, args.postgres, otlp
        bin_dir = harness.bin_dir()
        self.cluster = (harness.ScaleCluster(bin_dir, instances=1, prefix=f"signalfetch-profile-{label}-")
                        if args.postgres else harness.Cluster(bin_dir, prefix=f"signalfetch-profile-{label}-"))
        self.users = [f"user{i:03d}" for i in range(16)]

    def start(self):
        cluster = self.cluster
        cluster.add_accounts(self.users)
        extra = [] if self.postgres else ["--synchronous", "FULL"]
        if self.otlp:
            extra += ["--otlp-endpoint", self.otlp]
        if self.path == "ingest":
            extra += ["--lmtp-listen", "127.0.0.1:0"]
        if self.path == "signal":
            cluster.start_apns_sim()
        else:
            cluster.sim_port = 9  # no gateway: no device is registered, so no signal is sent
        if self.postgres:
            cluster.start_instance(0, extra=extra)
        else:
            cluster.start_mailboxd(extra=extra)
        self.lmtp_port = getattr(cluster, "lmtp_port", None)
        if self.path == "signal":
            harness.start_devices(cluster, self.users, 2, timeout=120)
        self.env = cluster.delivery_load_env(self.users)
        self.script = data_path("deliveries.lua")
        if self.path == "changes":
            self.prepare_changes()

    def prepare_changes(self):
        """50 messages for user000, and wrk's environment for data/changes.lua: its token and the state before the
        newest."""
        api, user = self.cluster.api(), self.users[0]
        token = api.login(user, f"password-{user}", "profile")
        receipt = None
        for i in range(50):
            _, receipt = api.call("POST", "/v1/deliveries", token=self.cluster.delivery_token,
                                  body={"to": user, "from": "a@example.com", "subject": f"m{i}", "body": "x"})
        epoch, top = receipt["state"].rsplit("-", 1)
        self.env.update(SCALE_TOKEN=token, PROFILE_SINCE=f"{epoch}-{int(top) - 1}")
        self.script = data_path("changes.lua")

    def load(self, seconds):
        """Load on the path for about `seconds`; (messages, elapsed seconds)."""
        if self.path == "ingest":
            count = int(seconds * 3000)  # about as long as the other paths run
            started = time.monotonic()
            done = subprocess.run(
                ["smtp-source", "-L", "-s", "20", "-m", str(count), "-l", "4096", "-d", "-f", "sender@sender.test",
                 "-t", "user000@example.test", "-M", "client.test", f"127.0.0.1:{self.lmtp_port}"],
                capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                raise RuntimeError(f"smtp-source failed: {done.stderr[-300:]}")
            return count, time.monotonic() - started
        connections = 8 if self.path == "signal" else 16
        out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{int(seconds)}s", "-s", self.script,
                              self.cluster.api_url], capture_output=True, text=True, timeout=seconds + 60, env=self.env)
        requests = re.search(r"(\d+) requests in ([\d.]+)s", out.stdout)
        if not requests or "Non-2xx" in out.stdout:
            raise RuntimeError(f"wrk failed: {out.stdout[-400:]}")
        return int(requests.group(1)), float(requests.group(2))

    def record(self, seconds):
        """perf record on mailboxd while the load runs; (perf script text, messages, elapsed, mailboxd CPU s, CPU
        seconds and context switches by thread group)."""
        pid = self.cluster.mailboxd.pid
        data = os.path.join(self.cluster.work, "perf.data")
        perf = subprocess.Popen(["perf", "record", "-F", "999", "-g", "-p", str(pid), "-o", data],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.3)
        cpu0, threads0 = process_cpu(pid), thread_activity(pid)
        count, elapsed = self.load(seconds)
        cpu, threads = process_cpu(pid) - cpu0, thread_activity_delta(threads0, thread_activity(pid))
        perf.send_signal(2)
        perf.wait(timeout=60)
        text = subprocess.run(["perf", "script", "-i", data, "-F", "ip,sym,dso"], capture_output=True, text=True,
                              errors="replace").stdout
        return text, count, elapsed, cpu, threads


def tally(samples):
    """Samples by component (the leaf's library), by self and total time per frame, and folded stacks."""
    names = demangle({symbol for stack in samples for symbol, _ in stack})
    by_component, self_time, total_time = collections.Counter(), collections.Counter(), collections.Counter()
    folded = collections.Counter()
    for stack in samples:
        leaf_symbol, leaf_dso = stack[0]
        by_component[component(leaf_dso)] += 1
        self_time[names.get(leaf_symbol, leaf_symbol)] += 1
        for frame in {names.get(symbol, symbol) for symbol, _ in stack}:
            total_time[frame] += 1
        folded[";".join(names.get(symbol, symbol).replace(";", ",") for symbol, _ in reversed(stack))] += 1
    return by_component, self_time, total_time, folded


def write_profile(args, label, samples, count, elapsed, cpu, threads):
    by_component, self_time, total_time, folded = tally(samples)
    n = len(samples)
    per_message_ms = cpu / count * 1000
    store = "PostgreSQL" if args.postgres else "SQLite"
    lines = [f"Profile of mailboxd on the {args.path} path ({store}): {count} messages in {elapsed:.1f} s "
             f"({count / elapsed:.0f}/s), {cpu:.2f} s of mailboxd CPU = {per_message_ms:.3f} ms per message; "
             f"{n} samples at 999 Hz", "", "CPU by component (the leaf frame's library):"]
    for name, value in by_component.most_common():
        lines.append(f"  {100 * value / n:5.1f}%  {per_message_ms * value / n:7.3f} ms/msg  {name}")
    # The hand-offs: which threads a message wakes, and how often. A context switch is a thread going to sleep
    # (waiting for work, the network, a lock) or being preempted; each costs the kernel's switch both ways.
    lines += ["", "Threads (CPU and context switches per message; a switch is a sleep and a wake-up):"]
    busy = sorted(threads.items(), key=lambda item: -item[1][0])
    for name, (seconds, switches) in busy:
        if seconds > 0 or switches > 0:
            lines.append(f"  {seconds / count * 1000:7.3f} ms/msg  {switches / count:6.2f} switches/msg  {name}")
    total_switches = sum(switches for _, switches in threads.values())
    lines.append(f"  {'':7} {'':6}  {total_switches / count:6.2f} switches/msg  in all")
    lines += ["", "Top 30 frames by self time:"]
    lines += [f"  {100 * v / n:5.1f}%  {name}" for name, v in self_time.most_common(30)]
    lines += ["", "Top 30 frames by total time (on the stack):"]
    lines += [f"  {100 * v / n:5.1f}%  {name}" for name, v in total_time.most_common(30)]
    base = os.path.join(args.out, f"profile-{label}")
    with open(base + ".txt", "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(base + ".folded", "w") as f:
        f.write("\n".join(f"{stack} {c}" for stack, c in folded.most_common()) + "\n")
    flame_svg(folded, base + ".svg", f"mailboxd, {args.path} ({store}): {per_message_ms:.3f} ms CPU per message")
    print("\n".join(lines[:lines.index("Top 30 frames by self time:") - 1]), file=sys.stderr)
    print(json.dumps({"benchmark": f"profile-{label}", "title": f"CPU per message on the {args.path} path ({store})",
                      "messages": count, "rate_per_s": round(count / elapsed, 1),
                      "cpu_ms_per_message": round(per_message_ms, 3), "samples": n,
                      "switches_per_message": round(total_switches / count, 2),
                      "by_component": {name: round(100 * v / n, 1) for name, v in by_component.most_common()},
                      "top_self": [[name, round(100 * v / n, 1)] for name, v in self_time.most_common(10)]}))


def main():
    parser = argparse.ArgumentParser(prog="signalfetch.profile")
    parser.add_argument("path", choices=["delivery", "changes", "signal", "ingest"])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--out", default="bench-results")
    parser.add_argument("--console", action="store_true", help="with a console open (reading /console/events)")
    parser.add_argument("--otlp", action="store_true", help="with traces exported over OTLP/HTTP")
    parser.add_argument("--postgres", action="store_true",
                        help="the store on a throwaway PostgreSQL (Scripts/postgres-instance) instead of SQLite")
    args = parser.parse_args()
    if not shutil.which("perf"):
        raise SystemExit("profile: perf is missing (Debian linux-perf; Scripts/bootstrap --bench installs it)")
    os.makedirs(args.out, exist_ok=True)
    label = (args.path + ("-postgres" if args.postgres else "") + ("-console" if args.console else "")
             + ("-otlp" if args.otlp else ""))
    collector = Collector() if args.otlp else None
    target = Target(args, label, otlp=collector.url if collector else None)
    try:
        target.start()
        if args.console:
            harness.ConsoleReader(target.cluster, timing=False, timeout=300)
        target.load(2)  # warm-up
        text, count, elapsed, cpu, threads = target.record(args.seconds)
    finally:
        target.cluster.close()
        if collector:
            collector.close()
    samples = parse_perf(text)
    if not samples:
        raise SystemExit("profile: perf recorded no samples")
    write_profile(args, label, samples, count, elapsed, cpu, threads)


if __name__ == "__main__":
    main()
