"""SignalFetch failure drills: real release binaries, real faults, invariants checked at the end.

Usage: python3 -m signalfetch.drills [--short] [--rounds N] [crash] [gateway-faults] [gateway-down] [storage] [hostile]
       [connections] [scale] [failover]
Exits non-zero when a drill's invariant fails; prints one summary line per drill."""
import argparse, asyncio, json, os, random, re, resource, signal, socket, ssl, subprocess, sys, threading, time

from . import data_path, harness, idle, log
from .harness import server_states, wait_converged
from .measure import percentile


class DrillFailure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise DrillFailure(message)


# MARK: - Mixed load with an acknowledgement ledger

class Loader:
    """Threads that deliver messages and change flags, recording every acknowledged write.

    Each thread only changes flags of messages it delivered, so the operations on one message are ordered.
    A request that got no answer (the server died) is "unacknowledged": it may or may not have happened."""

    def __init__(self, cluster, users, threads=3, pause=0.01, flag_share=0.4):
        self.cluster, self.users, self.pause, self.flag_share = cluster, users, pause, flag_share
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.acked = {u: set() for u in users}  # message ids acknowledged per account
        self.flag_ops = {}  # (id, field) -> list of (value, acked)
        self.owner = {}  # id -> user
        self.counts = {"deliveries": 0, "flags": 0, "unacknowledged": 0, "errors_5xx": 0, "storage_503": 0}
        self.timeline = []  # (monotonic time, HTTP status) of every answer, for unavailability windows
        self.sessions = {}
        api = cluster.api()
        for u in users:
            self.sessions[u] = api.login(u, f"password-{u}", "drill-loader")
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(threads)]

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self):
        self.stop_event.set()
        for t in self.threads:
            t.join(30)

    def _run(self, index):
        rng = random.Random(index * 7919 + int(time.time()))
        api = self.cluster.api(timeout=10)
        mine = []
        n = 0
        while not self.stop_event.is_set():
            n += 1
            try:
                if mine and rng.random() < self.flag_share:
                    mid, user = rng.choice(mine)
                    field = rng.choice(["seen", "flagged"])
                    value = rng.random() < 0.5
                    with self.lock:
                        ops = self.flag_ops.setdefault((mid, field), [])
                        ops.append([value, False])
                        entry = ops[-1]
                    status, _ = api.call("PATCH", f"/v1/messages/{mid}", token=self.sessions[user],
                                         body={field: value})
                    self._answered(status)
                    if status == 200:
                        with self.lock:
                            entry[1] = True
                            self.counts["flags"] += 1
                    else:
                        self._status(status)
                else:
                    user = rng.choice(self.users)
                    status, body = api.call("POST", "/v1/deliveries", token=self.cluster.delivery_token, body={
                        "to": user, "from": f"drill{index}@example.com", "subject": f"Drill {index}-{n}",
                        "body": harness.deliver_body(n, 300)})
                    self._answered(status)
                    if status == 201:
                        with self.lock:
                            self.acked[user].add(body["id"])
                            self.owner[body["id"]] = user
                            self.counts["deliveries"] += 1
                        mine.append((body["id"], user))
                    else:
                        self._status(status)
            except (OSError, ConnectionError, Exception) as error:  # the server went away mid-request
                if isinstance(error, DrillFailure):
                    raise
                with self.lock:
                    self.counts["unacknowledged"] += 1
                time.sleep(0.05)
            if self.pause:
                time.sleep(self.pause)

    def _answered(self, status):
        with self.lock:
            self.timeline.append((time.monotonic(), status))

    def unavailability(self, since, gap=2.0):
        """Seconds from the first 503 at or after `since` to the first success after the outage's last 503 (None
        without a 503; infinity while it lasts). The outage is the run of 503s each within `gap` seconds of the
        previous one, so a straggler success in the middle (a transaction the dying server still finished) does not
        end it."""
        with self.lock:
            answers = [a for a in self.timeline if a[0] >= since]
        refusals = [t for t, status in answers if status == 503]
        if not refusals:
            return None
        last = refusals[0]
        for t in refusals[1:]:
            if t - last > gap:
                break
            last = t
        back = next((t for t, status in answers if t > last and status < 300), None)
        return (back - refusals[0]) if back is not None else float("inf")

    def _status(self, status):
        with self.lock:
            if status == 503:
                self.counts["storage_503"] += 1
            elif status >= 500:
                self.counts["errors_5xx"] += 1

    def verify(self):
        """Every acknowledged delivery exists; every flag is its last acknowledged value (or a later unacked one)."""
        api = self.cluster.api()
        lost, wrong, checked = [], [], 0
        for user in self.users:
            token = api.login(user, f"password-{user}", "drill-check")
            messages, cursor = {}, None
            while True:
                status, page = api.call("GET", "/v1/messages?limit=1000" + (f"&cursor={cursor}" if cursor else ""),
                                        token=token)
                check(status == 200, f"listing {user}: HTTP {status}")
                for m in page["messages"]:
                    messages[m["id"]] = m
                cursor = page.get("nextCursor")
                if not cursor:
                    break
            for mid in self.acked[user]:
                if mid not in messages:
                    lost.append(mid)
            for (mid, field), ops in self.flag_ops.items():
                if self.owner.get(mid) != user or mid not in messages:
                    continue
                last_acked = max((i for i, op in enumerate(ops) if op[1]), default=None)
                allowed = {ops[last_acked][0]} if last_acked is not None else {False}
                allowed |= {op[0] for op in ops[(last_acked + 1 if last_acked is not None else 0):] if not op[1]}
                checked += 1
                if messages[mid][field] not in allowed:
                    wrong.append((mid, field))
        return lost, wrong, checked


def device_order_violations(cluster, clients, users):
    """Per device token, states of the signals apns-sim received must never go backwards. A signal carries the tag
    of its state under the device's key; the drill reads it back with the keys the devices printed."""
    states = server_states(cluster, users)
    epoch = next(d.last_sync["state"].rsplit("-", 1)[0] for d in clients.devices if d.last_sync)
    reader = harness.TagReader({d.token: d.signal_keys for d in clients.devices if d.token},
                              epoch, max(s[0] for s in states.values()))
    last, violations, requests = {}, [], 0
    for entry in sorted(cluster.sim_log(), key=lambda e: e["sequence"]):
        token = entry.get("deviceToken")
        try:
            st = json.loads(entry["payload"]).get("st")
        except (ValueError, TypeError):
            continue
        if not token or not st:
            continue
        requests += 1
        m = reader.modseq(token, st)
        if m is None:
            violations.append((token[:8], "a tag that names no state of the account", st, entry["status"]))
            continue
        if token in last and m < last[token]:
            violations.append((token[:8], last[token], m, entry["status"]))
        last[token] = max(m, last.get(token, m))
    return violations, requests


def gateway_outcomes(cluster, last=None):
    """{"status reason": count} of the provider requests apns-sim logged (the last `last` ones when given)."""
    entries = sorted(cluster.sim_log(), key=lambda e: e["sequence"])
    counts = {}
    for e in entries[-last:] if last else entries:
        key = f"{e['status']} {e.get('reason') or ''}".strip()
        counts[key] = counts.get(key, 0) + 1
    return counts


def start_devices(cluster, users, per_user=2, fallback=0):
    return harness.start_devices(cluster, users, per_user, fallback=fallback, timeout=120)


# MARK: - Drills

def drill_crash(bin_path, short, rounds=None):
    rounds = rounds or (2 if short else 10)
    cluster = harness.Cluster(bin_path, prefix="signalfetch-drill-crash-")
    users = ["ann", "ben", "cat"]
    try:
        cluster.add_accounts(users)
        cluster.start_apns_sim()
        cluster.start_mailboxd()
        clients = start_devices(cluster, users)
        loader = Loader(cluster, users)
        loader.start()
        integrity = []
        rng = random.Random()
        for r in range(rounds):
            time.sleep(rng.uniform(0.5, 3.0))
            cluster.mailboxd.kill9()
            cluster.procs.remove(cluster.mailboxd)
            integrity.append(cluster.integrity())
            time.sleep(rng.uniform(0.0, 0.5))
            cluster.start_mailboxd()
        time.sleep(1.5)
        loader.stop()
        integrity.append(cluster.integrity())
        lost, wrong, checked = loader.verify()
        ok, detail = wait_converged(cluster, clients, users, timeout=30)
        if not ok:
            detail += (f"; gateway answers (last 200): {gateway_outcomes(cluster, 200)}; outbox "
                       f"{cluster.healthz()}; mailboxd log: {cluster.mailboxd.stderr_tail(300)!r}")
        summary = (f"{rounds} kill -9 rounds, {loader.counts['deliveries']} deliveries and {loader.counts['flags']} "
                   f"flag changes acknowledged, {loader.counts['unacknowledged']} unacknowledged; lost {len(lost)}, "
                   f"wrong flags {len(wrong)}/{checked}; integrity {sorted(set(integrity))}; {detail}")
        check(not lost, f"acknowledged deliveries lost: {lost[:5]} — {summary}")
        check(not wrong, f"flags differ from the acknowledged value: {wrong[:5]} — {summary}")
        check(all(i == "ok" for i in integrity), f"integrity_check failed: {integrity} — {summary}")
        check(loader.counts["errors_5xx"] == 0, f"{loader.counts['errors_5xx']} 5xx answers — {summary}")
        check(ok, summary)
        return summary
    finally:
        cluster.close()


def drill_gateway_faults(bin_path, short):
    seconds = 15 if short else 60
    cluster = harness.Cluster(bin_path, prefix="signalfetch-drill-faults-")
    users = ["dan", "eve", "fay", "gus"]
    try:
        cluster.add_accounts(users)
        cluster.start_apns_sim(extra=["--fault-drop", "0.3", "--fault-429", "0.1", "--fault-503", "0.05",
                                      "--fault-goaway-after", "500", "--fault-seed", "42"])
        cluster.start_mailboxd()
        clients = start_devices(cluster, users, fallback=5)
        loader = Loader(cluster, users, threads=2, pause=0.02)
        loader.start()
        time.sleep(seconds)
        loader.stop()
        lost, wrong, checked = loader.verify()
        ok, detail = wait_converged(cluster, clients, users, timeout=60)
        retries = cluster.metric("mailboxd_signal_retries_total")
        sent = cluster.metric("mailboxd_signals_sent_total")
        violations, requests = device_order_violations(cluster, clients, users)
        summary = (f"{loader.counts['deliveries']} deliveries + {loader.counts['flags']} flag changes over {seconds} s "
                   f"with drop 0.3 / 429 0.1 / 503 0.05 / GOAWAY after 500; {int(sent)} signals accepted, "
                   f"{int(retries)} retries, {requests} provider requests, {len(violations)} out-of-order states; "
                   f"{detail}")
        check(not lost and not wrong, f"lost {len(lost)} deliveries, {len(wrong)} wrong flags — {summary}")
        check(not violations, f"a device was sent an older state after a newer one: {violations[:5]} — {summary}")
        check(retries > 0, f"no retries recorded although the gateway refused requests — {summary}")
        check(ok, summary)
        return summary
    finally:
        cluster.close()


class GatewayProxy:
    """A TCP proxy in front of apns-sim that can refuse every connection (the gateway is down) and come back."""

    def __init__(self, target_port):
        self.target = target_port
        self.port = 0  # any free port the first time; the same one each time it comes back up
        self.loop = asyncio.new_event_loop()
        self.server = None
        self.transports = set()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.up()

    async def _handle(self, reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.close()
            return
        self.transports |= {writer.transport, up_writer.transport}

        async def pipe(src, dst):
            try:
                while True:
                    data = await src.read(65536)
                    if not data:
                        break
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.CancelledError):
                pass
            finally:
                dst.transport.abort()
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def up(self):
        async def start():
            self.server = await asyncio.start_server(self._handle, "127.0.0.1", self.port, reuse_address=True)
            self.port = self.server.sockets[0].getsockname()[1]
        asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)

    def down(self):
        async def stop():
            self.server.close()
            await self.server.wait_closed()
            for t in list(self.transports):
                t.abort()
            self.transports.clear()
        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)


def drill_gateway_down(bin_path, short):
    down_seconds = 5 if short else 30
    cluster = harness.Cluster(bin_path, prefix="signalfetch-drill-down-")
    users = ["hal", "ivy"]
    try:
        cluster.add_accounts(users)
        cluster.start_apns_sim()
        proxy = GatewayProxy(cluster.sim_port)
        cluster.start_mailboxd(apns_port=proxy.port)
        clients = start_devices(cluster, users)
        api = cluster.api()
        proxy.down()
        t_down = time.monotonic()
        for i in range(20):
            status, _ = api.call("POST", "/v1/deliveries", token=cluster.delivery_token, body={
                "to": users[i % 2], "from": "down@example.com", "subject": f"While down {i}", "body": "x"})
            check(status == 201, f"delivery while the gateway is down: HTTP {status}")
        time.sleep(1.0)
        depth_down = cluster.healthz()["outboxDepth"]
        cpu0, wall0 = cluster.mailboxd.cpu_seconds(), time.monotonic()
        time.sleep(max(1.0, down_seconds - (time.monotonic() - t_down)))
        cpu = cluster.mailboxd.cpu_seconds() - cpu0
        wall = time.monotonic() - wall0
        cpu_percent = 100.0 * cpu / wall
        retries = cluster.metric("mailboxd_signal_retries_total")
        proxy.up()
        t_up = time.monotonic()
        drained = None
        while time.monotonic() - t_up < (60 if short else 120):
            if cluster.healthz()["outboxDepth"] == 0:
                drained = time.monotonic() - t_up
                break
            time.sleep(0.2)
        ok, detail = wait_converged(cluster, clients, users, timeout=30)
        summary = (f"gateway down {down_seconds} s with {depth_down} outbox rows: mailboxd CPU {cpu_percent:.2f}% "
                   f"over {wall:.1f} s ({int(retries)} retries), outbox drained "
                   f"{'in %.1f s' % drained if drained is not None else 'NEVER'} after the gateway came back; {detail}")
        check(depth_down > 0, f"the outbox was empty while the gateway was down — {summary}")
        check(cpu_percent < 5.0, f"mailboxd is busy while waiting for the gateway — {summary}")
        check(drained is not None, f"the outbox did not drain — {summary}")
        check(ok, summary)
        return summary
    finally:
        cluster.close()


def mount(*args):
    return subprocess.run(["mount", *args], capture_output=True, text=True)


class Storage:
    """mailboxd's data folder put through storage faults (disk full on a small tmpfs, then read-only), with every
    acknowledged delivery remembered."""

    def __init__(self, cluster, users):
        self.cluster, self.users = cluster, users
        self.notes, self.problems, self.mounted, self.acked = [], [], [], []
        self.api = None

    def deliver(self, i):
        try:
            status, body = self.api.call("POST", "/v1/deliveries", token=self.cluster.delivery_token, body={
                "to": self.users[i % 2], "from": "disk@example.com", "subject": f"Disk {i}", "body": "y" * 2000})
        except Exception as error:  # a dropped connection is recorded as the exception's name
            return type(error).__name__, None
        if status == 201:
            self.acked.append(body["id"])
        return status, body

    def move_to_tmpfs(self):
        """The data folder on a small tmpfs, mailboxd started on it."""
        cluster = self.cluster
        tmpfs = os.path.join(cluster.work, "small")
        os.makedirs(tmpfs)
        r = mount("-t", "tmpfs", "-o", "size=24m", "tmpfs", tmpfs)
        check(r.returncode == 0, f"cannot mount a tmpfs for the disk-full drill (needs root): {r.stderr.strip()}")
        self.mounted.append(tmpfs)
        subprocess.run(["cp", "-a", cluster.data, tmpfs], check=True)
        cluster.data = os.path.join(tmpfs, "data")
        cluster.db = os.path.join(cluster.data, "mailbox.sqlite")
        cluster.start_mailboxd(extra=["--data-dir", cluster.data])
        self.api = cluster.api()
        return tmpfs

    def disk_full(self):
        """Disk full: the tmpfs filled up while mailboxd runs, then freed."""
        cluster = self.cluster
        tmpfs = self.move_to_tmpfs()
        for i in range(50):
            check(self.deliver(i)[0] == 201, "delivery before the disk filled up failed")
        filler = os.path.join(tmpfs, "filler")
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
        statuses, codes, first_failure = {}, set(), None
        for i in range(50, 250):
            status, body = self.deliver(i)
            statuses[status] = statuses.get(status, 0) + 1
            if status != 201:
                codes.add((body or {}).get("error"))
                first_failure = first_failure or i
        healthz_full, _ = self.api.call("GET", "/healthz")
        os.remove(filler)
        time.sleep(0.5)
        after = [self.deliver(i)[0] for i in range(250, 270)]
        self.notes.append(f"disk full: deliveries answered {statuses} (first refusal at #{first_failure}) with errors "
                          f"{sorted(codes - {None})}, /healthz {healthz_full}; after freeing space "
                          f"{after.count(201)}/20 succeeded")
        check(all(isinstance(s, int) and (400 <= s < 500 or s in (201, 503, 507)) for s in statuses),
              f"unclear errors while the disk was full: {statuses} (mailboxd: {cluster.mailboxd.stderr_tail(300)!r})")
        check(any(s != 201 for s in statuses), f"the disk never filled up: {statuses}")
        check(after.count(201) == 20, f"deliveries failed after space was freed: {after}")
        cluster.mailboxd.stop()
        cluster.procs.remove(cluster.mailboxd)
        integrity_full = cluster.integrity()
        check(integrity_full == "ok", f"integrity_check after disk full: {integrity_full}")

    def read_only_answer(self, proc):
        """What mailboxd does on a read-only data folder: serves (with clear errors on writes) or exits."""
        cluster = self.cluster
        deadline = time.time() + 15
        while time.time() < deadline:
            if proc.poll() is not None:
                first = open(proc.err_path, errors="replace").read().strip().splitlines()[:3]
                result = f"mailboxd exited with status {proc.returncode}: {' | '.join(first)!r}"
                if proc.returncode <= 0:
                    self.problems.append(f"mailboxd crashed (signal {-proc.returncode}) on a read-only data folder "
                                         f"instead of exiting with a clear error: {result}")
                return result
            try:
                socket.create_connection(("127.0.0.1", cluster.api_port), timeout=0.2).close()
                status_r, _ = self.api.call("GET", "/healthz")
                status_w, body_w = self.deliver(999)
                result = f"served: /healthz {status_r}, delivery {status_w} {(body_w or {}).get('error')}"
                check(status_w in (503, 507) or 400 <= status_w < 500, f"unclear error on a read-only disk: {result}")
                return result
            except OSError:
                time.sleep(0.1)
        return None

    def read_only(self):
        """Read-only: the data folder bind-mounted read-only before mailboxd starts. (A read-only remount cannot be
        forced under a running process that holds the database open for writing: the kernel says EBUSY.)"""
        cluster = self.cluster
        r1 = mount("--bind", cluster.data, cluster.data)
        r2 = mount("-o", "remount,bind,ro", cluster.data) if r1.returncode == 0 else r1
        check(r2.returncode == 0, f"cannot make the data folder read-only: {r2.stderr.strip()}")
        self.mounted.append(cluster.data)
        proc = cluster.start("mailboxd-ro", cluster.serve_args(cluster.api_port))
        self.api.reset()
        result = self.read_only_answer(proc)
        check(result is not None, "mailboxd neither served nor exited on a read-only data folder")
        self.notes.append("read-only: " + result)
        proc.stop()
        cluster.procs.remove(proc)
        unmounted = subprocess.run(["umount", cluster.data], capture_output=True, text=True)
        check(unmounted.returncode == 0, f"umount: {unmounted.stderr}")
        self.mounted.remove(cluster.data)
        integrity_ro = cluster.integrity()
        check(integrity_ro == "ok", f"integrity_check after read-only: {integrity_ro}")

    def afterwards(self):
        """mailboxd back on a healthy folder: every acknowledged delivery present, deliveries accepted."""
        cluster = self.cluster
        cluster.start_mailboxd(extra=["--data-dir", cluster.data])
        listed = server_states(cluster, self.users)
        present = set().union(*(v[2] for v in listed.values()))
        missing = [m for m in self.acked if m not in present]
        check(not missing, f"{len(missing)} acknowledged deliveries missing after the storage faults")
        self.api.reset()
        status, _ = self.deliver(1000)
        check(status == 201, f"delivery after the storage faults: HTTP {status}")
        self.notes.append(f"afterwards: integrity ok, all {len(self.acked)} acknowledged deliveries present")

    def unmount(self):
        for proc in list(self.cluster.procs):
            proc.stop()
        self.cluster.procs.clear()
        for path in reversed(self.mounted):
            subprocess.run(["umount", "-l", path], capture_output=True)


def drill_storage(bin_path, short):
    cluster = harness.Cluster(bin_path, prefix="signalfetch-drill-storage-")
    users = ["jon", "kim"]
    storage = Storage(cluster, users)
    try:
        cluster.add_accounts(users)
        cluster.start_apns_sim()
        storage.disk_full()
        storage.read_only()
        storage.afterwards()
        check(not storage.problems, " ".join(storage.problems) + " — " + "; ".join(storage.notes))
        return "; ".join(storage.notes)
    finally:
        storage.unmount()
        cluster.close()


class Attack:
    """Hostile clients against one mailboxd, on threads until `stop`: 10,000 idle TCP connections, slowloris,
    oversize and malformed requests; and a legitimate client whose answers are timed."""

    def __init__(self, cluster, token, idle_target=10000):
        self.cluster, self.token, self.idle_target = cluster, token, idle_target
        self.ctx = ssl.create_default_context(cafile=cluster.ca)
        self.stop = threading.Event()
        self.hold = []
        self.failures = []
        self.stats = {"oversize": {}, "utf8": {}, "headers": {}, "slowloris_open": 0, "idle_open": 0}
        self.started = time.monotonic()

    def legit_once(self):
        """One legitimate request on a fresh TLS connection; (ok, ms)."""
        t0 = time.perf_counter()
        try:
            api = harness.API(self.cluster.api_port, self.cluster.ca, timeout=3)
            status, _ = api.raw("GET", "/v1/mailboxes", token=self.token)
            api.reset()
            if status != 200:
                self.failures.append(f"HTTP {status} at +{time.monotonic() - self.started:.1f} s")
            return status == 200, (time.perf_counter() - t0) * 1000
        except Exception as error:
            self.failures.append(f"{type(error).__name__} at +{time.monotonic() - self.started:.1f} s "
                                 f"({self.stats['idle_open']} idle open)")
            return False, (time.perf_counter() - t0) * 1000

    def legit_series(self, seconds):
        results = []
        end = time.time() + seconds
        while time.time() < end:
            results.append(self.legit_once())
            time.sleep(0.05)
        return results

    def idle(self):
        """10,000 idle TCP connections."""
        for _ in range(self.idle_target):
            if self.stop.is_set():
                break
            try:
                s = socket.create_connection(("127.0.0.1", self.cluster.api_port), timeout=2)
                self.hold.append(s)
                self.stats["idle_open"] += 1
            except OSError:
                time.sleep(0.01)

    def slowloris(self):
        """200 connections sending a header line every 2 s and never finishing."""
        socks = []
        for _ in range(200):
            try:
                s = self.ctx.wrap_socket(socket.create_connection(("127.0.0.1", self.cluster.api_port), timeout=5),
                                         server_hostname="127.0.0.1")
                s.sendall(b"GET /v1/mailboxes HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                socks.append(s)
            except OSError:
                pass
        self.stats["slowloris_open"] = len(socks)
        i = 0
        while not self.stop.is_set():
            i += 1
            for s in list(socks):
                try:
                    s.sendall(f"X-Slow-{i}: a\r\n".encode())
                except OSError:
                    socks.remove(s)
            self.stop.wait(2)
        self.stats["slowloris_alive_at_end"] = len(socks)
        for s in socks:
            s.close()

    def malformed(self):
        """Bodies over the cap, invalid UTF-8, huge headers, in turn; each answer tallied."""
        api = harness.API(self.cluster.api_port, self.cluster.ca, timeout=10)
        delivery = self.cluster.delivery_token
        big = b'{"to":"lee","from":"a@b.c","subject":"s","body":"' + b"z" * (2 << 20) + b'"}'
        bad = b'{"to":"lee","from":"a@b.c","subject":"\xff\xfe\xc3","body":"x"}'
        calls = (("oversize", lambda: api.raw("POST", "/v1/deliveries", delivery, big)),
                 ("utf8", lambda: api.raw("POST", "/v1/deliveries", delivery, bad)),
                 ("headers", lambda: api.raw("GET", "/v1/mailboxes", self.token, headers={"X-Huge": "h" * 65536})))
        while not self.stop.is_set():
            for key, call in calls:
                try:
                    answer = call()[0]
                except Exception as error:
                    answer = type(error).__name__
                    api.reset()
                self.stats[key][answer] = self.stats[key].get(answer, 0) + 1
            self.stop.wait(0.1)

    def bad_tokens(self, seconds):
        """wrk with a made-up token at ~1,000 requests/s (data/paced.lua); stopped with SIGINT."""
        return subprocess.Popen(["wrk", "-t1", "-c10", f"-d{seconds + 60}s", "-s", data_path("paced.lua"), "-H",
                                 "Authorization: Bearer not-a-valid-token-0123456789",
                                 f"{self.cluster.api_url}/v1/mailboxes"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    def close(self):
        for s in self.hold:
            s.close()


def describe_series(series):
    oks = [ms for ok, ms in series if ok]
    return f"{len(oks)}/{len(series)} ok, p50 {percentile(oks, 50) or 0:.1f} ms, p99 {percentile(oks, 99) or 0:.1f} ms"


def run_attack(attack, attack_seconds):
    """Starts every attacker, times the legitimate client while the idle connections open and once they all are;
    (ramp, saturated, seconds until saturated, wrk's output)."""
    attack.started = time.monotonic()
    wrk = attack.bad_tokens(attack_seconds)
    workers = [threading.Thread(target=f, daemon=True) for f in (attack.slowloris, attack.malformed)]
    for w in workers:
        w.start()
    time.sleep(1)
    opener = threading.Thread(target=attack.idle, daemon=True)
    opener.start()
    workers.append(opener)
    ramp = []
    while opener.is_alive() and time.monotonic() - attack.started < 90:
        ramp += attack.legit_series(1)
    t_saturated = time.monotonic() - attack.started
    saturated = attack.legit_series(attack_seconds)
    wrk.send_signal(signal.SIGINT)  # wrk prints its summary on SIGINT
    wrk_out = wrk.communicate(timeout=60)[0]
    attack.stop.set()
    for w in workers:
        w.join(30)
    return ramp, saturated, t_saturated, wrk_out


def check_hostile(stats, served, summary):
    closed = ("ConnectionResetError", "BrokenPipeError", "RemoteDisconnected", "SSLEOFError", "SSLError")
    check(413 in stats["oversize"] and all(k == 413 or k in closed or k == "TimeoutError" for k in stats["oversize"]),
          f"bodies over the cap not refused with 413 (or the connection closed) — {summary}")
    check(stats["utf8"] and all(not isinstance(k, int) or 400 <= k < 500 for k in stats["utf8"]),
          f"invalid UTF-8 not a 4xx — {summary}")
    check(all(not isinstance(k, int) or 400 <= k < 500 for k in stats["headers"]),
          f"huge headers not refused with a 4xx — {summary}")
    check(served >= 0.95, f"legitimate clients were not served during the attack — {summary}")


def drill_hostile(bin_path, short):
    attack_seconds = 10 if short else 45  # held after the 10,000 idle connections are open
    cluster = harness.Cluster(bin_path, prefix="signalfetch-drill-hostile-")
    attack = None
    try:
        harness.raise_fd_limit()
        cluster.add_accounts(["lee"])
        cluster.start_apns_sim()
        cluster.start_mailboxd()
        attack = Attack(cluster, cluster.api().login("lee", "password-lee", "legit"))
        base = attack.legit_series(3)
        attack.failures.clear()
        ramp, saturated, t_saturated, wrk_out = run_attack(attack, attack_seconds)
        m = re.search(r"(\d+) requests in ([\d.]+)s", wrk_out)
        bad_rate = int(m.group(1)) / float(m.group(2)) if m else 0
        non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", wrk_out)
        stats = attack.stats
        served = sum(1 for ok, _ in saturated if ok) / max(1, len(saturated))
        summary = (f"{stats['idle_open']} idle connections, {stats['slowloris_open']} slowloris, "
                   f"{bad_rate:.0f} bad-token req/s ({non2xx.group(1) if non2xx else 0} non-2xx), oversize bodies "
                   f"{stats['oversize']}, invalid UTF-8 {stats['utf8']}, huge headers {stats['headers']}; legitimate "
                   f"client before: {describe_series(base)}; while connecting the idle ones: {describe_series(ramp)}; "
                   f"with all {stats['idle_open']} open (from +{t_saturated:.0f} s, {attack_seconds} s): "
                   f"{describe_series(saturated)}" + (f"; legitimate failures: {attack.failures[:6]}"
                                                      if attack.failures else ""))
        check(cluster.mailboxd.poll() is None, f"mailboxd died — {summary}")
        check_hostile(stats, served, summary)
        return summary
    finally:
        if attack:
            attack.close()
        cluster.close()


# MARK: - Idle TLS connections up to the limit

IDLE_TIMEOUT = 60  # s: mailboxd ends a connection that has sent no request for this long
LEGIT_REQUESTS = 50
PROMPT_EXIT = 5.0  # s from SIGTERM to mailboxd's exit with nothing in flight


def served_fresh(cluster, token, requests):
    """`requests` GETs of /v1/mailboxes, each on a fresh TLS connection; (answered 200, the failures)."""
    ok, failures = 0, []
    for _ in range(requests):
        api = harness.API(cluster.api_port, cluster.ca, timeout=5)
        try:
            status, _ = api.raw("GET", "/v1/mailboxes", token=token)
            ok += status == 200
            if status != 200:
                failures.append(f"HTTP {status}")
        except Exception as error:  # refused, reset or timed out: the server did not serve it
            failures.append(type(error).__name__)
        finally:
            api.reset()
    return ok, failures


def drill_connections(bin_path, short):
    """mailboxd holding idle TLS connections (10,000 with --short; else its limit, the hard open-file limit less
    1,024, less a few places for the legitimate client) from several processes and source addresses
    (signalfetch.idle), each handshake completed, nothing sent. A legitimate client on fresh connections is served,
    mailboxd stays up, no held connection is ended before the idle timeout, and SIGTERM with all of them open ends
    mailboxd with status 0 at once, every held connection seeing the close."""
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1] - 1024
    target = 10000 if short else limit - 16
    cluster = harness.Cluster(bin_path, prefix="signalfetch-drill-connections-")
    held = None
    try:
        cluster.add_accounts(["mia"])
        cluster.sim_port = 9  # no gateway: nothing here signals
        cluster.start_mailboxd(extra=["--max-connections", str(limit)])
        token = cluster.api().login("mia", "password-mia", "legit")
        held = idle.IdleConnections(cluster.api_port, cluster.ca, target, cluster.work, label="drill")
        started = time.monotonic()
        opened = held.open_to(target)
        ok, failures = served_fresh(cluster, token, LEGIT_REQUESTS)
        alive = cluster.mailboxd.poll() is None
        state = held.check()
        held_for = time.monotonic() - started
        stopped_at = time.monotonic()
        status = cluster.mailboxd.stop(timeout=3 * PROMPT_EXIT)  # SIGTERM; SIGKILL if it is still there after
        exited = time.monotonic() - stopped_at
        cluster.procs.remove(cluster.mailboxd)
        closes = held.await_close(10)
        last_close = closes["last"] - stopped_at if closes["last"] is not None else None
        summary = (f"{opened['opened']:,}/{target:,} idle TLS connections held from {len(held.holders)} processes "
                   f"({opened['opened'] / opened['seconds']:.0f} handshakes/s"
                   f"{', failures ' + str(opened['errors']) if opened['errors'] else ''}; limit {limit:,}); legitimate "
                   f"client served {ok}/{LEGIT_REQUESTS}{' (' + ', '.join(failures[:5]) + ')' if failures else ''}; "
                   f"after {held_for:.0f} s {state['open']:,} still open, {state['closed']} ended by the server; "
                   f"SIGTERM: exit status {status} in {exited:.2f} s, {closes['closed']:,} connections saw the close"
                   + (f" (the last {last_close:.2f} s after the signal)" if last_close is not None else "")
                   + (f", {closes['open']:,} did not" if closes["open"] else ""))
        check(opened["opened"] == target, f"not every idle connection could be opened — {summary}")
        check(alive, f"mailboxd died while holding them: {cluster.mailboxd.stderr_tail(300)!r} — {summary}")
        check(ok >= 0.95 * LEGIT_REQUESTS, f"the legitimate client was not served — {summary}")
        check(held_for < IDLE_TIMEOUT, f"held longer than the {IDLE_TIMEOUT} s idle timeout: the check of open "
                                       f"connections says nothing — {summary}")
        check(state["closed"] == 0, f"mailboxd ended idle connections before the idle timeout — {summary}")
        check(status == 0 and exited <= PROMPT_EXIT, f"SIGTERM did not end mailboxd with status 0 within "
                                                     f"{PROMPT_EXIT:g} s: {cluster.mailboxd.stderr_tail(300)!r} — "
                                                     f"{summary}")
        check(closes["open"] == 0 and closes["closed"] == target, f"held connections did not see the close — "
                                                                   f"{summary}")
        return summary
    finally:
        if held:
            held.close()
        cluster.close()


def check_cluster_invariants(loader, lost, wrong, violations, integrity, summary):
    """What every drill on a shared store must end with: nothing acknowledged lost or changed, no 5xx but 503, no
    signal backwards, the modseq invariant."""
    check(not lost, f"acknowledged deliveries lost: {lost[:5]} — {summary}")
    check(not wrong, f"flags differ from the acknowledged value: {wrong[:5]} — {summary}")
    check(loader.counts["errors_5xx"] == 0, f"5xx answers other than 503 — {summary}")
    check(not violations, f"signals went backwards: {violations[:3]} — {summary}")
    check(integrity == "ok", f"invariant check failed: {integrity} — {summary}")


# MARK: - Scale-out: several mailboxd on one PostgreSQL

def signals_per_device(cluster):
    """{device token: signals apns-sim accepted for it}."""
    counts = {}
    for entry in cluster.sim_log():
        if entry.get("status") == 200 and entry.get("deviceToken"):
            counts[entry["deviceToken"]] = counts.get(entry["deviceToken"], 0) + 1
    return counts


def drill_scale(bin_path, short):
    kills = 3 if short else 12
    cluster = harness.ScaleCluster(bin_path)
    users = ["kim", "lou", "max", "ned"]
    try:
        cluster.add_accounts(users)
        cluster.start_apns_sim()
        for index in range(len(cluster.ports)):
            cluster.start_instance(index)
        clients = start_devices(cluster, users)  # registered through the instances in turn
        loader = Loader(cluster, users, threads=6)
        loader.start()
        rng = random.Random()
        killed = []
        restart_at = kills // 2
        pg_restart = None
        for round_ in range(kills):
            time.sleep(rng.uniform(1.0, 3.0))
            index = rng.randrange(len(cluster.ports))
            cluster.kill_instance(index)
            killed.append(index)
            time.sleep(rng.uniform(0.2, 1.0))
            cluster.start_instance(index)
            if round_ == restart_at:
                t0 = time.monotonic()
                restarted = cluster.postgres("restart")
                check(restarted.returncode == 0, f"PostgreSQL did not restart: {restarted.stderr}")
                pg_restart = time.monotonic() - t0
        time.sleep(1.5)
        loader.stop()
        lost, wrong, checked = loader.verify()
        ok, detail = wait_converged(cluster, clients, users, timeout=60)
        violations, requests = device_order_violations(cluster, clients, users)
        outcomes = gateway_outcomes(cluster)
        states = server_states(cluster, users)
        per_device = signals_per_device(cluster)
        over = [(d.name, per_device.get(d.token, 0), states[d.user][0] + 1) for d in clients.devices
                if per_device.get(d.token, 0) > states[d.user][0] + 1]
        integrity = cluster.integrity()
        summary = (f"3 mailboxd on one PostgreSQL, {kills} kill -9 (instances {killed}), PostgreSQL restarted once "
                   f"({pg_restart:.1f} s); {loader.counts['deliveries']} deliveries and {loader.counts['flags']} flag "
                   f"changes acknowledged, {loader.counts['unacknowledged']} unacknowledged, "
                   f"{loader.counts['storage_503']} answered 503, {loader.counts['errors_5xx']} other 5xx; lost "
                   f"{len(lost)}, wrong flags {len(wrong)}/{checked}; {requests} signals, {len(violations)} "
                   f"out of order, {len(over)} devices signalled more than their changes; gateway {outcomes}; "
                   f"integrity {integrity}; {detail}")
        check_cluster_invariants(loader, lost, wrong, violations, integrity, summary)
        check(not over, f"devices got more signals than changes: {over[:3]} — {summary}")
        check(not any("TooManyProviderTokenUpdates" in key for key in outcomes),
              f"the instances replaced the provider token too often — {summary}")
        check(ok, summary)
        return summary
    finally:
        cluster.close()

# MARK: - Failover: the database's primary killed under three mailboxd

def failover_round(cluster, loader, round_):
    """Kills the primary under load, waits for the loaders to be answered again and for the standby's promotion,
    and brings the old primary back as a standby; (unavailability window in s, the new primary)."""
    time.sleep(3.0)
    before = loader.counts["deliveries"]
    killed_at = time.monotonic()
    killed = cluster.postgres("kill-primary")
    check(killed.returncode == 0, f"kill-primary failed: {killed.stderr}")
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        window = loader.unavailability(killed_at)
        if window is not None and window != float("inf"):
            break
        if window is None and loader.counts["deliveries"] > before + 50 and time.monotonic() - killed_at > 15:
            break  # no request fell in the gap
        time.sleep(0.2)
    time.sleep(2.5)  # past the outage's gap: a later 503 would still belong to it
    window = loader.unavailability(killed_at)
    check(window != float("inf"), f"failover {round_ + 1}: no success within 90 s of the kill")
    deadline = time.monotonic() + 30  # the monitor's record settles after the node already takes writes
    while True:
        status = cluster.status()
        if status["primary"] and status["primary"] != killed.stdout.strip() or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    check(status["primary"] and status["primary"] != killed.stdout.strip(),
          f"failover {round_ + 1}: the standby was not promoted: {status}")
    rejoined = cluster.postgres("rejoin")
    check(rejoined.returncode == 0, f"failover {round_ + 1}: rejoin failed: {rejoined.stderr}")
    return window or 0.0, status["primary"]


def drill_failover(bin_path, short):
    """Three mailboxd under load on a pg_auto_failover cluster (primary + synchronous standby). The primary is
    SIGKILLed with its keeper; the monitor promotes the standby; the old primary rejoins as a standby; then the new
    primary is killed in turn. Nothing acknowledged may be lost, only 503 may be answered, devices converge, signals
    never go backwards; each failover's unavailability window (the loaders' first 503 to the first success after
    the last 503 of that run, see Loader.unavailability) is reported."""
    failovers = 2 if short else 4
    cluster = harness.FailoverCluster(bin_path)
    users = ["kim", "lou", "max", "ned"]
    try:
        check(cluster.status()["synchronous"], f"the standby is not synchronous at start: {cluster.status()}")
        cluster.add_accounts(users)
        cluster.start_apns_sim()
        for index in range(len(cluster.ports)):
            cluster.start_instance(index)
        clients = start_devices(cluster, users)
        loader = Loader(cluster, users, threads=6)
        loader.start()
        windows, promoted = [], []
        for round_ in range(failovers):
            window, primary = failover_round(cluster, loader, round_)
            windows.append(window)
            promoted.append(primary)
        time.sleep(1.5)
        loader.stop()
        lost, wrong, checked = loader.verify()
        ok, detail = wait_converged(cluster, clients, users, timeout=60)
        violations, requests = device_order_violations(cluster, clients, users)
        integrity = cluster.integrity()
        final = cluster.status()
        median = percentile(windows, 50)
        summary = (f"3 mailboxd on a pg_auto_failover cluster, {failovers} failovers (primaries after each: "
                   f"{promoted}); unavailability windows {', '.join(f'{w:.1f}' for w in windows)} s (median "
                   f"{median:.1f}, max {max(windows):.1f}; goal <= 10); {loader.counts['deliveries']} deliveries and "
                   f"{loader.counts['flags']} flag changes acknowledged, {loader.counts['unacknowledged']} "
                   f"unanswered, {loader.counts['storage_503']} answered 503, {loader.counts['errors_5xx']} other "
                   f"5xx; lost {len(lost)}, wrong flags {len(wrong)}/{checked}; {requests} signals, {len(violations)} "
                   f"out of order; integrity {integrity}; after the drill {final}; {detail}")
        check_cluster_invariants(loader, lost, wrong, violations, integrity, summary)
        check(final["synchronous"], f"the cluster is not synchronous after the drill — {summary}")
        check(ok, summary)
        return summary
    finally:
        cluster.close()


DRILLS = {"crash": drill_crash, "gateway-faults": drill_gateway_faults, "gateway-down": drill_gateway_down,
          "storage": drill_storage, "hostile": drill_hostile, "connections": drill_connections,
          "scale": drill_scale, "failover": drill_failover}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--short", action="store_true")
    parser.add_argument("--rounds", type=int, help="crash rounds (default 10, 2 with --short)")
    parser.add_argument("drills", nargs="*", choices=[[]] + list(DRILLS), default=[])
    args = parser.parse_args()
    harness.stop_on_termination()
    names = args.drills or list(DRILLS)
    bin_path = harness.bin_dir()
    harness.raise_fd_limit()
    failed = []
    lines = []
    for name in names:
        start = time.monotonic()
        log(f"==> drill {name}{' (short)' if args.short else ''}")
        try:
            extra = {"rounds": args.rounds} if name == "crash" and args.rounds else {}
            summary = DRILLS[name](bin_path, args.short, **extra)
            lines.append(f"PASS {name} ({time.monotonic() - start:.0f} s): {summary}")
        except DrillFailure as failure:
            failed.append(name)
            lines.append(f"FAIL {name} ({time.monotonic() - start:.0f} s): {failure}")
        except Exception as error:
            failed.append(name)
            lines.append(f"FAIL {name} ({time.monotonic() - start:.0f} s): the drill could not run: "
                         f"{type(error).__name__}: {error}")
        print(lines[-1], flush=True)
    print("\n".join(["", "drills summary:"] + lines), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
