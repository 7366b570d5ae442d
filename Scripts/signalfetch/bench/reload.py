"""reload: SIGHUP under load — 100 deliveries/s and 1,000 held event streams while the certificate is renewed and the
push configuration read again every two seconds; counts failed requests and dropped streams."""
import asyncio
import os
import signal
import ssl
import subprocess
import threading
import time

from ..harness import http_get
from ..report import emit
from . import freshness


def renew_certificate(cluster, work):
    """A new key and certificate from the dev CA, each file replaced whole (a copy, then a rename)."""
    os.makedirs(work, exist_ok=True)
    key, csr, pem = (os.path.join(work, name) for name in ("server.key", "server.csr", "server.pem"))
    san = os.path.join(work, "san.cnf")
    with open(san, "w") as out:
        out.write("subjectAltName = DNS:localhost, IP:127.0.0.1\n")
    tls = os.path.join(cluster.data, "tls")
    for step in (["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key],
                 ["req", "-new", "-key", key, "-subj", "/CN=localhost", "-out", csr],
                 ["x509", "-req", "-in", csr, "-CA", os.path.join(tls, "ca.pem"), "-CAkey", os.path.join(tls, "ca.key"),
                  "-CAcreateserial", "-days", "2", "-extfile", san, "-out", pem]):
        subprocess.run(["openssl"] + step, check=True, capture_output=True)
    os.rename(key, os.path.join(tls, "server.key"))
    os.rename(pem, os.path.join(tls, "server.pem"))


class Streams:
    """`count` JMAP event streams (`/jmap/eventsource`, TLS, one connection each) spread over the accounts, read on
    an asyncio loop of their own: the events each heard, and which ended."""

    def __init__(self, cluster, tokens, count):
        self.cluster, self.tokens, self.count = cluster, tokens, count
        self.events = [0] * count
        self.ended = [False] * count
        self.opened = 0
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main())

    async def _main(self):
        self.stop = asyncio.Event()
        context = ssl.create_default_context(cafile=self.cluster.ca)
        tasks = [asyncio.create_task(self._stream(index, context)) for index in range(self.count)]
        await self.stop.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _stream(self, index, context):
        token = self.tokens[index % len(self.tokens)]
        reader, writer = await asyncio.open_connection("127.0.0.1", self.cluster.api_port, ssl=context)
        writer.write((f"GET /jmap/eventsource?types=*&closeafter=no&ping=30 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n").encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        if b" 200 " not in head.split(b"\r\n", 1)[0]:
            raise RuntimeError(f"event stream: {head[:60]!r}")
        self.opened += 1
        if self.opened == self.count:
            self.ready.set()
        try:
            while True:
                line = await reader.readline()
                if not line:
                    self.ended[index] = True
                    return
                if line.startswith(b"event: state"):
                    self.events[index] += 1
        except (ConnectionError, ssl.SSLError, asyncio.IncompleteReadError):
            self.ended[index] = True

    def close(self):
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(timeout=30)


def deliveries(cluster, users, rate, seconds, outcomes):
    """`rate` deliveries/s for `seconds` over two keep-alive TLS connections, round-robin over `users`; each
    answer's status (or the error) appended to `outcomes`."""
    api = [cluster.api(timeout=30), cluster.api(timeout=30)]
    start = time.monotonic()
    for n in range(int(rate * seconds)):
        due = start + n / rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        try:
            status, _ = api[n % 2].call("POST", "/v1/deliveries", token=cluster.delivery_token,
                                        body={"to": users[n % len(users)], "from": "bench@example.com",
                                              "subject": "reload", "body": "under load"})
        except Exception as error:  # a reset or a refused handshake is the failure this counts
            status = repr(error)[:80]
        outcomes.append(status)


def run(env):
    """Reload under load: mailboxd with a pid file, 1,000 JMAP event streams held over TLS by 100 accounts, and
    100 deliveries/s; every two seconds a new certificate is written and SIGHUP sent (every listener's certificate,
    the delivery token and the push configuration read again). Afterwards: requests that failed (any answer but
    201, or a connection error), streams the server ended, and whether every stream heard a change after the last
    reload."""
    users = freshness.users(100)
    seconds = env.by_mode(12, 60)
    cluster = env.topology("reload")
    streams = None
    try:
        cluster.add_accounts(users)
        cluster.start_apns_sim()
        pid_file = os.path.join(cluster.work, "mailboxd.pid")
        cluster.start_mailboxd(extra=["--pid-file", pid_file])
        api = cluster.api()
        tokens = [api.login(user, f"password-{user}", "reload") for user in users]
        streams = Streams(cluster, tokens, 1000)
        if not streams.ready.wait(timeout=120):
            raise RuntimeError(f"only {streams.opened} of 1000 event streams opened")
        outcomes = []
        loader = threading.Thread(target=deliveries, args=(cluster, users, 100.0, seconds, outcomes))
        loader.start()
        reloads = 0
        pid = int(open(pid_file).read())
        while loader.is_alive():
            time.sleep(2)
            renew_certificate(cluster, os.path.join(cluster.work, "renewal"))
            os.kill(pid, signal.SIGHUP)
            reloads += 1
        loader.join()
        heard_before = list(streams.events)
        # One more delivery to every account after the last reload: each stream must hear it.
        after = []
        deliveries(cluster, users, 100.0, 1.0, after)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(
                e <= b and not d for e, b, d in zip(streams.events, heard_before, streams.ended)):
            time.sleep(0.1)
        deaf = sum(1 for e, b in zip(streams.events, heard_before) if e <= b)
        failed = [o for o in outcomes + after if o != 201]
        dropped = sum(streams.ended)
        page = http_get(f"http://127.0.0.1:{cluster.metrics_port}/metrics", timeout=5).decode()
        counts = {line.split('"')[1]: float(line.rsplit(" ", 1)[1]) for line in page.splitlines()
                  if line.startswith("mailboxd_reloads_total{outcome=")}
        applied, refused = counts.get("applied", 0), counts.get("refused", 0)
        emit({"benchmark": "reload-under-load",
              "title": "SIGHUP every 2 s (a new certificate, the push configuration read again) at 100 deliveries/s "
                       "with 1,000 held event streams", "deliveries": len(outcomes) + len(after),
              "failed_requests": len(failed), "failures": sorted(set(map(str, failed)))[:5], "streams": 1000,
              "dropped_streams": dropped, "streams_deaf_after_last_reload": deaf, "reloads": reloads,
              "reloads_applied": applied, "reloads_refused": refused,
              "met": not failed and dropped == 0 and deaf == 0 and refused == 0 and applied >= reloads})
    finally:
        if streams:
            streams.close()
        cluster.close()
