"""jmap-ws: JMAP over WebSocket (RFC 8887, `mailboxd serve --jmap-ws-listen`) against JMAP over HTTPS in the same
run, and how soon one change reaches many sockets. Each row runs on a topology of its own.

- jmap-ws-roundtrips: one JMAP request a round trip, `Email/changes` from a fixed earlier state and `Email/get` of
  those ids by result reference (`#ids`, eight properties), over one WebSocket ÷ the same request body POSTed to
  `/jmap/api` on one keep-alive HTTP/1.1 connection; the same account and bearer token. The row's figure is the sync
  a device makes after a signal, one email created since its state; the same with 50 emails created is beside it.
  Both clients are one compiled process's (`signalfetch-bench roundtrips`), blocking TLS sockets equally thin, so
  neither side's client costs more than the other's, and the client's share of a round trip (it runs on the same
  two cores) is small: RFC 6455 framing written out, and a keep-alive HTTP/1.1 client that sends each request whole
  in one write and reads the answer to its Content-Length. Each checks an answer's length and method names without
  parsing it. Alongside, in the same rounds: the one-email sync through the same two clients written in Python here
  (`Socket`, `Keepalive`; `python_clients`: how much a client's own cost moves the figure), the 50-email sync over
  http.client, and Core/echo over both transports (what they cost with next to no JMAP work). Each round takes every
  side in turns of 50 round trips, side after side (the order rotating from round to round), so each side's figure
  comes from the same stretch of time as the others'. The row carries every side's client CPU per round trip and
  mailboxd's (/proc/PID/stat).
- jmap-ws-fanout: one delivery → a StateChange on each of 1,000 sockets of one account (`--jmap-ws-max-sockets-per-
  account 1000`), the ms from just before the delivery's POST to each socket's StateChange; several deliveries,
  each heard by every socket before the next. The sockets are held by one compiled process (`signalfetch-bench
  wsholder`: one epoll loop, OpenSSL, RFC 6455 framing written out), so that reading 1,000 StateChanges takes the
  two cores mailboxd runs on for little (two Python asyncio processes took 27–39 ms of CPU a delivery, more
  than mailboxd's own 18–25 ms); every socket is ready before anything is measured: push enabled for Email, then a
  Request answered on it. An arrival is the kernel's receive time of the frame's bytes (SO_TIMESTAMPNS,
  CLOCK_REALTIME: each read is one recvmsg, its bytes decrypted by OpenSSL from memory), so it does not include how
  long the holder took to get round to one socket among 1,000; when the holder handled each one (CLOCK_MONOTONIC,
  system-wide, the clock of time.monotonic()) is reported beside it. Every other delivery is made while the
  clients hold off reading (what arrives waits in the kernel, its receive time noted there), so they take no CPU
  while mailboxd writes: those samples are the server's alone (`clients_holding_off`). The same with 100 sockets
  first, for scale, and mailboxd's CPU per delivery with 0, 100 and 1,000 sockets (and its WebSocket loop thread's).

Each StateChange is matched to its delivery by state: the Email state it names is the delivery receipt's `state`.
Standard library only."""
import base64
import collections
import hashlib
import http.client
import json
import os
import random
import socket
import ssl
import struct
import subprocess
import time

from .. import harness, log
from ..measure import latency_summary, process_cpu, thread_activity, thread_activity_delta
from ..idle import LineProcess
from ..report import emit, latency_row, missed_events, paired

CORE, MAIL = "urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PROPERTIES = ["id", "threadId", "mailboxIds", "keywords", "subject", "from", "receivedAt", "size"]
BEFORE, CREATED = 10, 50  # emails before the fixed state, and created since it (what Email/changes returns)
HOLDERS = 1  # processes holding the fan-out's sockets (`signalfetch-bench wsholder`)
FANOUT_GOAL_P99_MS, ROUNDTRIP_GOAL = 50.0, 1.5
LOOP_THREAD = "jmap-ws"  # the WebSocket listener's ConnectionLoop thread (measure.thread_activity's group)


# MARK: - RFC 6455 framing (client side: every frame masked)

def mask(data, key):
    n = len(data)
    if not n:
        return b""
    return (int.from_bytes(data, "big") ^ int.from_bytes((key * (n // 4 + 1))[:n], "big")).to_bytes(n, "big")


def frame(payload, opcode=0x1):
    """One final client frame (text by default), masked."""
    key = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    return head + key + mask(payload, key)


def opening(port, token):
    """The opening handshake's request (Bearer, subprotocol jmap) and the Sec-WebSocket-Accept it must be answered
    with."""
    key = base64.b64encode(os.urandom(16))
    accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
    request = (f"GET /jmap/ws HTTP/1.1\r\nHost: localhost:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key.decode()}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: jmap\r\n"
               f"Authorization: Bearer {token}\r\n\r\n").encode()
    return request, accept


def check_opening(head, accept):
    lines = head.split(b"\r\n")
    if not lines[0].startswith(b"HTTP/1.1 101"):
        raise RuntimeError(f"the WebSocket was refused: {head[:300]!r}")
    fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])}
    if fields.get(b"sec-websocket-accept") != accept or fields.get(b"sec-websocket-protocol") != b"jmap":
        raise RuntimeError(f"a 101 without the right accept or subprotocol: {head[:300]!r}")


def split_frames(buffer):
    """Complete frames at the start of `buffer` (bytearray, consumed): [(fin, opcode, payload)]."""
    frames, at = [], 0
    while len(buffer) - at >= 2:
        b0, b1 = buffer[at], buffer[at + 1]
        n, i = b1 & 0x7F, at + 2
        if n == 126:
            if len(buffer) - i < 2:
                break
            n, i = struct.unpack_from("!H", buffer, i)[0], i + 2
        elif n == 127:
            if len(buffer) - i < 8:
                break
            n, i = struct.unpack_from("!Q", buffer, i)[0], i + 8
        key = None
        if b1 & 0x80:
            if len(buffer) - i < 4:
                break
            key, i = bytes(buffer[i:i + 4]), i + 4
        if len(buffer) - i < n:
            break
        payload = bytes(buffer[i:i + n])
        frames.append((bool(b0 & 0x80), b0 & 0x0F, mask(payload, key) if key else payload))
        at = i + n
    del buffer[:at]
    return frames


class Messages:
    """Reassembles frames into messages: [(opcode, payload)], control frames as they come."""

    def __init__(self):
        self.parts, self.opcode = [], None

    def feed(self, frames):
        out = []
        for fin, opcode, payload in frames:
            if opcode >= 0x8:
                out.append((opcode, payload))
                continue
            if opcode:
                self.opcode, self.parts = opcode, []
            self.parts.append(payload)
            if fin:
                out.append((self.opcode, b"".join(self.parts)))
                self.parts = []
        return out


# MARK: - Round trips: one blocking WebSocket against one keep-alive HTTPS connection

class Socket:
    """One JMAP WebSocket on a blocking TLS socket."""

    def __init__(self, port, context, token):
        raw = socket.create_connection(("127.0.0.1", port), timeout=30)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = context.wrap_socket(raw, server_hostname="localhost")
        request, accept = opening(port, token)
        self.sock.sendall(request)
        self.buffer = bytearray()
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("the WebSocket listener closed the connection during the opening handshake")
            self.buffer += chunk
        end = self.buffer.index(b"\r\n\r\n")
        check_opening(bytes(self.buffer[:end]), accept)
        del self.buffer[:end + 4]
        self.messages, self.ready = Messages(), collections.deque()

    def send(self, payload):
        self.sock.sendall(frame(payload))

    def receive(self):
        """The next text message (pings answered on the way)."""
        if not self.ready:
            fast = self._whole_text()
            if fast is not None:
                return fast
        while not self.ready:
            for opcode, payload in self.messages.feed(split_frames(self.buffer)):
                if opcode == 0x1:
                    self.ready.append(payload)
                elif opcode == 0x9:
                    self.sock.sendall(frame(payload, 0xA))
                elif opcode == 0x8:
                    raise RuntimeError(f"the server closed the WebSocket: {payload[:200]!r}")
            if self.ready:
                break
            chunk = self.sock.recv(262144)
            if not chunk:
                raise RuntimeError("the server closed the connection")
            self.buffer += chunk
            if not self.ready:
                fast = self._whole_text()
                if fast is not None:
                    return fast
        return self.ready.popleft()

    def _whole_text(self):
        """A whole final text frame at the buffer's start, taken out as it is (the usual answer), else `None` and
        the general path reads: as little work a message as `Keepalive` does for an answer."""
        buffer = self.buffer
        if len(buffer) < 2 or buffer[0] != 0x81 or buffer[1] & 0x80:
            return None
        size, at = buffer[1], 2
        if size == 126:
            if len(buffer) < 4:
                return None
            size, at = int.from_bytes(buffer[2:4], "big"), 4
        elif size == 127:
            if len(buffer) < 10:
                return None
            size, at = int.from_bytes(buffer[2:10], "big"), 10
        if len(buffer) < at + size:
            return None
        payload = bytes(buffer[at:at + size])
        del buffer[:at + size]
        return payload

    def close(self):
        try:
            self.sock.sendall(frame(struct.pack("!H", 1000), 0x8))
        except OSError:
            pass
        self.sock.close()


def sync_request(account, since):
    return {"using": [CORE, MAIL], "methodCalls": [
        ["Email/changes", {"accountId": account, "sinceState": since}, "c"],
        ["Email/get", {"accountId": account, "#ids": {"resultOf": "c", "name": "Email/changes", "path": "/created"},
                       "properties": PROPERTIES}, "g"]]}


def check_sync(answer, label, expected=CREATED):
    """The first answer of a side, read in full: `expected` ids created, as many emails got."""
    calls = answer["methodResponses"]
    if [c[0] for c in calls] != ["Email/changes", "Email/get"]:
        raise RuntimeError(f"{label}: {json.dumps(answer)[:400]}")
    created, emails = calls[0][1]["created"], calls[1][1]["list"]
    if len(created) != expected or len(emails) != expected:
        raise RuntimeError(f"{label}: {len(created)} created, {len(emails)} emails, not {expected}")


class Keepalive:
    """One keep-alive HTTP/1.1 connection on a blocking TLS socket, as thin as `Socket`: a request made once and sent
    whole, a head read to its Content-Length, the body."""

    def __init__(self, port, context):
        raw = socket.create_connection(("127.0.0.1", port), timeout=30)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = context.wrap_socket(raw, server_hostname="localhost")
        self.buffer = bytearray()

    def exchange(self, request):
        """(status, body) of one request (its whole bytes)."""
        self.sock.sendall(request)
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            self.read()
        head = bytes(self.buffer[:end]).lower()
        status = int(head[9:12])
        at = head.find(b"\r\ncontent-length:")
        if at < 0:
            raise RuntimeError(f"an answer without Content-Length: {head[:300]!r}")
        line_end = head.find(b"\r\n", at + 2)
        length = int(head[at + 17:line_end if line_end > 0 else len(head)])
        while len(self.buffer) < end + 4 + length:
            self.read()
        body = bytes(self.buffer[end + 4:end + 4 + length])
        del self.buffer[:end + 4 + length]
        return status, body

    def read(self):
        chunk = self.sock.recv(262144)
        if not chunk:
            raise RuntimeError("the API closed the keep-alive connection")
        self.buffer += chunk

    def close(self):
        self.sock.close()


ECHO = {"using": [CORE], "methodCalls": [["Core/echo", {"hello": "world"}, "e"]]}


class Compiled:
    """The compiled client (`signalfetch-bench roundtrips`): each side one connection held open, a JMAP WebSocket
    or a keep-alive HTTPS connection, both blocking TLS sockets written in Swift; a turn of round trips per line
    asked, answered with its seconds and the client's CPU."""

    def __init__(self, bench, ca, sides, directory):
        path = os.path.join(directory, "roundtrip-sides.json")
        with open(path, "w") as out:
            json.dump(sides, out)
        self.process = subprocess.Popen([bench, "roundtrips", "--ca", ca, "--sides", path], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        ready = self.process.stdout.readline().strip()
        if ready != "ready":
            self.close()
            raise RuntimeError(f"signalfetch-bench roundtrips did not start: {ready!r}")

    def turn(self, name, trips):
        """(seconds, client CPU seconds) of `trips` round trips on side `name`."""
        self.process.stdin.write(f"{name} {trips}\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"signalfetch-bench roundtrips stopped during {name} (its stderr says why)")
        answer = json.loads(line)
        return answer["seconds"], answer["client_cpu_s"]

    def close(self):
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class RoundTrips:
    """The clients on one account, each connection open for the whole run. The row's sides go through the compiled
    client (`Compiled`): the sync request over the WebSocket (`ws`) and over a keep-alive HTTPS connection
    (`http`), the sync of the one new email (`ws-one`, `http-one`), and Core/echo (`ws-echo`, `http-echo`: what the
    transports cost with next to no JMAP work). Beside them, this process's clients: the one-email sync over thin
    Python clients (`py-ws-one`, `py-http-one`) and the 50-email sync over http.client (`http.client`), for how much
    a client's own cost moves the figure."""

    def __init__(self, cluster, bench, directory, token, account, since, since_one):
        self.context = ssl.create_default_context(cafile=cluster.ca)
        self.body = json.dumps(sync_request(account, since)).encode()
        one = json.dumps(sync_request(account, since_one)).encode()
        self.ws_one = json.dumps(dict(sync_request(account, since_one), **{"@type": "Request", "id": "%d"})).encode()
        self.headers = {"Content-Type": "application/json", "Authorization": "Bearer " + token}
        head = (f"POST /jmap/api HTTP/1.1\r\nHost: 127.0.0.1:{cluster.api_port}\r\nContent-Type: application/json\r\n"
                f"Authorization: Bearer {token}\r\nContent-Length: %d\r\n\r\n")
        self.http_one = (head % len(one)).encode() + one
        self.client = http.client.HTTPSConnection("127.0.0.1", cluster.api_port, context=self.context, timeout=30)
        self.keepalive = Keepalive(cluster.api_port, self.context)
        self.ws = Socket(cluster.jmap_ws_port, self.context, token)
        self.sequence = 0
        self.length = {}
        # Each request read back in full once, here, before any is timed.
        check_sync(json.loads(self.client_once()), "JMAP over HTTPS (http.client)")
        self.answer_bytes = len(self.http_once((head % len(self.body)).encode() + self.body))
        check_sync(json.loads(self.http_once(self.http_one)), "JMAP over HTTPS, one email", expected=1)
        answer = json.loads(self.ws_once(self.ws_one))
        if answer.get("@type") != "Response" or answer.get("requestId") != str(self.sequence):
            raise RuntimeError(f"JMAP over WebSocket: {json.dumps(answer)[:400]}")
        check_sync(answer, "JMAP over WebSocket, one email", expected=1)

        def ws(name, request):
            return {"name": name, "kind": "ws", "port": cluster.jmap_ws_port, "token": token, "expect": "",
                    "request": json.dumps(dict(request, **{"@type": "Request", "id": "%d"}))}

        def https(name, request):
            text = json.dumps(request)
            return {"name": name, "kind": "http", "port": cluster.api_port, "expect": "",
                    "request": (head % len(text.encode())) + text}

        sync, sync_one = sync_request(account, since), sync_request(account, since_one)
        compiled = [ws("ws", sync), https("http", sync), ws("ws-one", sync_one), https("http-one", sync_one),
                    ws("ws-echo", ECHO), https("http-echo", ECHO)]
        for side in compiled:
            side["expect"] = '"Core/echo"' if side["name"].endswith("echo") else '"Email/get"'
        self.compiled = Compiled(bench, cluster.ca, compiled, directory)
        self.sides = {side["name"]: (lambda trips, name=side["name"]: self.compiled.turn(name, trips))
                      for side in compiled}
        python = {"py-ws-one": lambda: self.ws_once(self.ws_one), "py-http-one": lambda: self.http_once(self.http_one),
                  "http.client": self.client_once}
        for name, once in python.items():
            self.sides[name] = lambda trips, name=name, once=once: self.python_turn(name, once, trips)

    def client_once(self):
        self.client.request("POST", "/jmap/api", body=self.body, headers=self.headers)
        response = self.client.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"POST /jmap/api answered {response.status}: {data[:300]!r}")
        return data

    def http_once(self, request):
        status, data = self.keepalive.exchange(request)
        if status != 200:
            raise RuntimeError(f"POST /jmap/api answered {status}: {data[:300]!r}")
        return data

    def ws_once(self, template):
        self.sequence += 1
        self.ws.send(template.replace(b'"%d"', b'"%d"' % self.sequence, 1))
        return self.ws.receive()

    def python_turn(self, name, once, trips):
        """(seconds, this process's CPU seconds) of `trips` round trips through one of this process's clients."""
        client, start = time.process_time(), time.perf_counter()
        for _ in range(trips):
            data = once()
            # Every answer is the same (the requestId's digits aside): the same length and method names.
            if b'"Email/get"' not in data or abs(len(data) - self.length.setdefault(name, len(data))) > 8:
                raise RuntimeError(f"{name}: an answer unlike the first: {data[:300]!r}")
        return time.perf_counter() - start, time.process_time() - client

    def side(self, name, count, mailboxd):
        """`count` round trips on one side: the rate, and its client's and mailboxd's CPU seconds over them."""
        return self.interleaved([name], count, mailboxd)[name]

    def interleaved(self, names, count, mailboxd, turn=50):
        """`count` round trips on each side of `names`, taken in turns of `turn` round trips, side after side: each
        side's figure comes from the same stretch of time as the others', so what else the machine does in it
        weighs on every side alike. Per side: the rate, and its client's and mailboxd's CPU seconds over its
        turns."""
        totals = {name: {"seconds": 0.0, "client_cpu_s": 0.0, "mailboxd_cpu_s": 0.0, "count": 0} for name in names}
        done = 0
        while done < count:
            trips = min(turn, count - done)
            for name in names:
                total = totals[name]
                server = process_cpu(mailboxd.pid)
                seconds, client = self.sides[name](trips)
                total["mailboxd_cpu_s"] += process_cpu(mailboxd.pid) - server
                total["seconds"] += seconds
                total["client_cpu_s"] += client
                total["count"] += trips
            done += trips
        return {name: dict(total, rate=total["count"] / total["seconds"]) for name, total in totals.items()}

    def close(self):
        self.compiled.close()
        self.ws.close()
        self.keepalive.close()
        self.client.close()


def jmap_setup(cluster, user):
    """A bearer token, the account's id, the WebSocket URL the Session names, a fixed state with CREATED emails
    delivered after it (BEFORE before it), and the state before the last of them."""
    api = cluster.api()
    token = api.login(user, f"password-{user}", "bench")
    status, session = api.call("GET", "/.well-known/jmap", token=token)
    if status != 200:
        raise RuntimeError(f"GET /.well-known/jmap answered {status}: {session}")
    account = session["primaryAccounts"][MAIL]
    url = session["capabilities"]["urn:ietf:params:jmap:websocket"]["url"]
    for i in range(BEFORE):
        harness.deliver(api, cluster, user, i, "early", "Before")
    status, answer = api.call("POST", "/jmap/api", token=token, body={
        "using": [CORE, MAIL], "methodCalls": [["Email/get", {"accountId": account, "ids": []}, "s"]]})
    if status != 200:
        raise RuntimeError(f"Email/get answered {status}: {answer}")
    since = answer["methodResponses"][0][1]["state"]
    for i in range(CREATED - 1):
        harness.deliver(api, cluster, user, BEFORE + i, "sender", "Since")
    status, answer = api.call("POST", "/jmap/api", token=token, body={
        "using": [CORE, MAIL], "methodCalls": [["Email/get", {"accountId": account, "ids": []}, "s"]]})
    if status != 200:
        raise RuntimeError(f"Email/get answered {status}: {answer}")
    since_one = answer["methodResponses"][0][1]["state"]
    harness.deliver(api, cluster, user, BEFORE + CREATED - 1, "sender", "Since")
    return token, account, url, since, since_one


def roundtrips(env):
    """WebSocket ÷ HTTPS round trips/s, every side in each round, the order rotating; the row."""
    rounds, count = env.by_mode(5, 7), env.by_mode(1500, 3000)
    cluster = env.topology("jmap-ws-roundtrips")
    try:
        cluster.add_accounts(["rt"])
        mailboxd = cluster.start_mailboxd(apns_port=9, extra=["--jmap-ws-listen", "127.0.0.1:0"])
        token, account, url, since, since_one = jmap_setup(cluster, "rt")
        if not url.endswith(f":{cluster.jmap_ws_port}/jmap/ws"):
            raise RuntimeError(f"the Session names {url}, the listener said port {cluster.jmap_ws_port}")
        trips = RoundTrips(cluster, env.bench, cluster.work, token, account, since, since_one)
        names = list(trips.sides)
        try:
            for name in names:
                trips.side(name, count // 10, mailboxd)
            results = {name: [] for name in names}
            for r in range(rounds):
                order = names[r % len(names):] + names[:r % len(names)]
                for name, result in trips.interleaved(order, count, mailboxd).items():
                    results[name].append(result)
            body_bytes, answer_bytes = len(trips.body), trips.answer_bytes
        finally:
            trips.close()
        log_lines = server_log(cluster)
    finally:
        cluster.close()

    def per_trip(name, key):
        side = results[name]
        return round(sum(r[key] for r in side) / sum(r["count"] for r in side) * 1e6, 1)

    def rates(name):
        return [round(r["rate"], 1) for r in results[name]]

    def ratio(a, b):
        return round(sorted(x["rate"] / y["rate"] for x, y in zip(results[a], results[b]))[rounds // 2], 3)

    ws, https = results["ws-one"], results["http-one"]
    row = paired("jmap-ws-roundtrips", "JMAP round trips/s, a device's sync after a signal (Email/changes + Email/get "
                 "of the one new email by #ids): one WebSocket vs HTTPS POST /jmap/api on one keep-alive HTTP/1.1 "
                 "connection", "round trips/s",
                 "WebSocket", [r["rate"] for r in ws], "HTTPS POST", [r["rate"] for r in https], ROUNDTRIP_GOAL,
                 sync_of_50={"ratio": ratio("ws", "http"), "ws": rates("ws"), "http": rates("http")},
                 rounds=rounds, round_trips_per_round=count, request_bytes=body_bytes, answer_bytes=answer_bytes,
                 mailboxd_cpu_us_per_trip={name: per_trip(name, "mailboxd_cpu_s") for name in names},
                 client_cpu_us_per_trip={name: per_trip(name, "client_cpu_s") for name in names},
                 wall_us_per_trip={name: per_trip(name, "seconds") for name in names},
                 http_client_rates=rates("http.client"), ratio_to_http_client=ratio("ws", "http.client"),
                 echo_rates={"ws": rates("ws-echo"), "http": rates("http-echo")},
                 echo_ratio=ratio("ws-echo", "http-echo"),
                 python_clients={"ratio": ratio("py-ws-one", "py-http-one"), "ws": rates("py-ws-one"),
                                 "http": rates("py-http-one")},
                 clients="both blocking TLS sockets in one compiled process (signalfetch-bench roundtrips): RFC 6455 "
                         "framing written out (WebSocket), a keep-alive HTTP/1.1 client (HTTPS); the same in Python "
                         "(python_clients) and http.client alongside",
                 **({"mailboxd_log": log_lines} if log_lines else {}))
    mailboxd_us, client_us = row["mailboxd_cpu_us_per_trip"], row["client_cpu_us_per_trip"]
    log(f"jmap-ws round trips (one new email): WebSocket {row['ours']}/s, HTTPS {row['baseline']}/s, ratio "
        f"{row['ratio']} (rounds {row['round_ratios']}); Python clients {row['python_clients']}; 50 emails "
        f"{row['sync_of_50']}; against http.client "
        f"{row['ratio_to_http_client']}; Core/echo {row['echo_ratio']} "
        f"({row['echo_rates']}); mailboxd µs/trip {mailboxd_us}; client µs/trip {client_us}")
    if not row["met"]:
        wall = row["wall_us_per_trip"]
        # With JMAP work of J µs a request on top of the echo round trips, WebSocket ÷ HTTPS is
        # (J + http echo) / (J + ws echo): at least the goal only while J is at most this.
        most = max(0.0, (wall["http-echo"] - ROUNDTRIP_GOAL * wall["ws-echo"]) / (ROUNDTRIP_GOAL - 1))
        row["finding"] = (
            f"jmap-ws-roundtrips: mailboxd spends {mailboxd_us['ws-one']} µs of CPU on the sync round trip over the "
            f"WebSocket and {mailboxd_us['http-one']} µs over HTTPS, against {mailboxd_us['ws-echo']} and "
            f"{mailboxd_us['http-echo']} µs for Core/echo: the JMAP work both share (Email/changes, 50 emails read "
            f"and written as JSON) is most of either, and the WebSocket saves the same few hundred µs on it as on an "
            f"echo (no HTTP parsing, no per-request authentication, no libmicrohttpd hand-off). Core/echo round "
            f"trips take {wall['ws-echo']} µs over the WebSocket and {wall['http-echo']} µs over HTTPS (ratio "
            f"{row['echo_ratio']}), so {ROUNDTRIP_GOAL}× holds only for requests whose JMAP work takes at most about "
            f"{most:.0f} µs of a round trip.")
    return row


def server_log(cluster, limit=10):
    """mailboxd's error and warning lines, if any (the last `limit`)."""
    lines = [line for line in cluster.mailboxd.output().splitlines()
             if any(word in line.lower() for word in ("error", "warning", "refus", "fail"))]
    return lines[-limit:]


# MARK: - Fan-out: the sockets' holder and the launcher

class Holder(LineProcess):
    """The compiled holder of the fan-out's sockets (`signalfetch-bench wsholder`, one epoll loop, OpenSSL): given
    `config` first, then the commands its usage lists ({"open"}, {"wait"}, {"hold"}, {"release"}, {"report"}), one
    JSON answer each."""

    def __init__(self, name, workdir, bench, config):
        super().__init__(name, workdir, None, command=[bench, "wsholder"])
        self.send(config)

    def cpu(self):
        return process_cpu(self.popen.pid)


class Fleet:
    def __init__(self, holders):
        self.holders = holders
        self.held = 0

    def ask(self, commands):
        for holder, command in zip(self.holders, commands):
            holder.send(command)
        return [holder.answer() for holder in self.holders]

    def open_to(self, total):
        more, n = total - self.held, len(self.holders)
        answers = self.ask([{"open": more // n + (1 if i < more % n else 0)} for i in range(n)])
        self.held = sum(a["held"] for a in answers)
        failed = sum(a["failed"] for a in answers)
        if failed:
            errors = collections.Counter()
            for a in answers:
                errors.update(a["errors"])
            raise RuntimeError(f"{failed} of {more} WebSockets did not open: {dict(errors)}")
        return max(a["seconds"] for a in answers)

    def wait(self, state, timeout=10):
        answers = self.ask([{"wait": state, "timeout": timeout}] * len(self.holders))
        return sum(a["heard"] for a in answers), sum(a["held"] for a in answers)

    def report(self, states):
        arrivals, others = [], collections.Counter()
        for answer in self.ask([{"report": states}] * len(self.holders)):
            arrivals += answer["arrivals"]
            others.update(answer["others"])
        return arrivals, dict(others)

    def cpu(self):
        return sum(holder.cpu() for holder in self.holders)

    def close(self):
        for holder in self.holders:
            holder.stop()


def deliveries(cluster, api, user, fleet, count, first, hold=0.0):
    """`count` deliveries to `user`, each heard by every socket before the next (when there are sockets); with
    `hold`, every other one while the clients hold off reading for `hold` seconds from just before its POST. [(state,
    wall time, monotonic time, wall time the clients read again or None)] taken just before each POST, and
    mailboxd's and the holders' CPU seconds over them."""
    sent, missed = [], 0
    pid = cluster.mailboxd.pid
    server, threads, clients = process_cpu(pid), thread_activity(pid), fleet.cpu() if fleet else 0.0
    for k in range(count):
        body = {"to": user, "from": f"sender{first + k}@example.com", "subject": f"Fan-out {first + k}",
                "body": harness.deliver_body(first + k)}
        held = bool(fleet and fleet.held and hold and k % 2)
        if held:
            fleet.ask([{"hold": True}] * len(fleet.holders))
        wall, mono = time.time(), time.monotonic()
        status, receipt = api.call("POST", "/v1/deliveries", token=cluster.delivery_token, body=body)
        if status != 201:
            raise RuntimeError(f"delivery: HTTP {status} {receipt}")
        released = None
        if held:
            time.sleep(max(0.0, hold - (time.monotonic() - mono)))
            released = time.time()
            fleet.ask([{"release": True}] * len(fleet.holders))
        sent.append((receipt["state"], wall, mono, released))
        if fleet and fleet.held:
            heard, held_sockets = fleet.wait(receipt["state"])
            missed += held_sockets - heard
        time.sleep(0.02 + random.random() * 0.03)
    loop = thread_activity_delta(threads, thread_activity(pid)).get(LOOP_THREAD, (0.0, 0))[0]
    return sent, {"mailboxd_cpu_s": process_cpu(pid) - server, "loop_cpu_s": loop,
                  "holders_cpu_s": (fleet.cpu() - clients) if fleet else 0.0, "missed": missed}


def samples(fleet, sent):
    """ms from just before each POST to each socket's StateChange, by the kernel's receive time: {"live": while the
    clients read, "held": while they held off; "handled": when the clients handled the live ones}; the (socket,
    delivery) pairs that never heard theirs, the held ones that arrived only once the clients read again, and
    messages other than the expected."""
    arrivals, others = fleet.report([state for state, _, _, _ in sent])
    found = {"live": [], "held": [], "handled": []}
    missing = late = 0
    for per_socket in arrivals:
        for (state, wall, mono, released), arrival in zip(sent, per_socket):
            if arrival is None:
                missing += 1
                continue
            if released is None:
                found["live"].append((arrival[0] - wall) * 1000)
                found["handled"].append((arrival[1] - mono) * 1000)
            else:
                found["held"].append((arrival[0] - wall) * 1000)
                late += arrival[0] > released
    return found, missing, late, others


def step(cluster, api, fleet, user, sockets, count, first, hold):
    """Opens sockets up to `sockets`, warms up with one delivery, then `count` measured, every other one while the
    clients hold off; the step's figures, and the live samples."""
    opened = fleet.open_to(sockets)
    deliveries(cluster, api, user, fleet, 1, first)  # every socket has read its states once
    sent, cost = deliveries(cluster, api, user, fleet, count, first + 1, hold)
    found, missing, late, others = samples(fleet, sent)
    result = {"sockets": fleet.held, "deliveries": count, "open_seconds": round(opened, 2),
              "mailboxd_cpu_ms_per_delivery": round(cost["mailboxd_cpu_s"] / count * 1000, 2),
              "loop_cpu_ms_per_delivery": round(cost["loop_cpu_s"] / count * 1000, 2),
              "holders_cpu_ms_per_delivery": round(cost["holders_cpu_s"] / count * 1000, 2),
              "missing": missing, "unheard_when_waited": cost["missed"], "others": others,
              "handled": latency_summary(found["handled"]) if found["handled"] else None,
              "clients_holding_off": dict(latency_summary(found["held"]), hold_ms=round(hold * 1000),
                                          arrived_after_hold=late) if found["held"] else None}
    if found["live"]:
        result.update(latency_summary(found["live"]))
    held = result["clients_holding_off"] or {}
    log(f"jmap-ws fan-out, {fleet.held} sockets: p50 {result.get('p50_ms')} p99 {result.get('p99_ms')} max "
        f"{result.get('max_ms')} ms (kernel receive); handled by the holder p50 {result['handled']['p50_ms']} p99 "
        f"{result['handled']['p99_ms']} ms; clients holding off p50 {held.get('p50_ms')} p99 {held.get('p99_ms')} "
        f"max {held.get('max_ms')} ms ({held.get('arrived_after_hold')} after the hold); mailboxd "
        f"{result['mailboxd_cpu_ms_per_delivery']} ms CPU a delivery ({result['loop_cpu_ms_per_delivery']} ms on "
        f"its WebSocket loop thread), the holder "
        f"{result['holders_cpu_ms_per_delivery']} ms; missing {missing}; opened in {opened:.1f} s")
    return result, found["live"]


def fanout(env, small=100, large=1000):
    """0, then 100, then 1,000 sockets on one account of one mailboxd; the row (1,000 sockets' samples)."""
    count, hold = env.by_mode(32, 64), 0.4
    cluster = env.topology("jmap-ws-fanout")
    fleet = None
    try:
        cluster.add_accounts(["fan"])
        cluster.start_mailboxd(apns_port=9, extra=["--jmap-ws-listen", "127.0.0.1:0",
                                                   "--jmap-ws-max-sockets-per-account", str(large)])
        api = cluster.api()
        token = api.login("fan", "password-fan", "bench")
        sent, cost = deliveries(cluster, api, "fan", None, count, 0)
        idle_cpu_ms = round(cost["mailboxd_cpu_s"] / count * 1000, 2)
        config = {"port": cluster.jmap_ws_port, "ca": cluster.ca, "token": token}
        fleet = Fleet([Holder(f"jmap-ws-holder-{i}", cluster.work, env.bench, config) for i in range(HOLDERS)])
        few, _ = step(cluster, api, fleet, "fan", small, count, 1000, hold)
        many, kernel = step(cluster, api, fleet, "fan", large, count, 2000, hold)
        log_lines = server_log(cluster)
    finally:
        if fleet:
            fleet.close()
        cluster.close()
    per_socket_us = round((many["mailboxd_cpu_ms_per_delivery"] - idle_cpu_ms) / large * 1000, 1)
    row = latency_row("jmap-ws-fanout", f"One delivery → StateChange on {large:,} WebSockets of one account: from "
                      "just before the delivery's POST to each socket's StateChange (kernel receive time)", kernel,
                      FANOUT_GOAL_P99_MS, f"JMAP WebSocket fan-out to {large:,} sockets:",
                      sockets=many["sockets"], deliveries=count, holders=HOLDERS, handled=many["handled"],
                      clients_holding_off=many["clients_holding_off"],
                      missing=many["missing"], others=many["others"], open_seconds=many["open_seconds"],
                      mailboxd_cpu_ms_per_delivery={"0": idle_cpu_ms, str(small): few["mailboxd_cpu_ms_per_delivery"],
                                                    str(large): many["mailboxd_cpu_ms_per_delivery"]},
                      mailboxd_cpu_us_per_socket=per_socket_us,
                      loop_cpu_ms_per_delivery=many["loop_cpu_ms_per_delivery"],
                      holders_cpu_ms_per_delivery=many["holders_cpu_ms_per_delivery"],
                      **{f"sockets_{small}": few}, **({"mailboxd_log": log_lines} if log_lines else {}))
    held = many["clients_holding_off"]
    if not row["met"]:
        row["finding"] += (
            f". With the clients holding off reading (not competing with mailboxd for the cores) p99 "
            f"{held['p99_ms']} ms. "
            f"mailboxd spends {many['mailboxd_cpu_ms_per_delivery']} ms of CPU on a delivery to {large:,} sockets "
            f"({idle_cpu_ms} ms with none: {per_socket_us} µs a socket), {many['loop_cpu_ms_per_delivery']} ms of it "
            f"on the WebSocket listener's one loop thread, which writes the sockets one after another (the "
            f"StateChange made once for all, then a TLS record and a send each); the {HOLDERS} holder process "
            f"takes {many['holders_cpu_ms_per_delivery']} ms of CPU a delivery "
            f"on the same cores.")
    return missed_events(row, many["missing"], "(socket, delivery) pairs never heard their StateChange")


def run(env):
    emit(roundtrips(env))
    emit(fanout(env))


