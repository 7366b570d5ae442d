import Foundation
import TestSupport

/// A small stateful stand-in for mailboxd's JSON API and apns-sim's device side, in Python, with hooks to
/// inject faults. It prints `PORT <n>` once listening on 127.0.0.1 (port 0 picks a free one).
enum FakeBackend {
    static let script = #"""
        import json, secrets, ssl, sys, threading, time, uuid
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import urlparse, parse_qs

        EPOCH = "00000000000000aa"
        LOCK = threading.Condition()
        S = {"messages": {}, "created": {}, "log": [], "modseq": 0, "floor": 0, "next": 1,
             "tokens": {}, "devices": {}, "sim": {}, "faults": [], "drop_signals": False, "requests": [],
             "stream_epoch": 0}
        USERS = {"alice": "secret"}
        DELIVERY = "delivery-secret"

        def state():
            return "%s-%d" % (EPOCH, S["modseq"])

        def wire(m, full=False):
            out = dict(m)
            if not full and m["size"] > 16384:
                out.pop("body")
            return out

        def signal_all():
            if S["drop_signals"]:
                LOCK.notify_all()  # event streams still hear of the change
                return
            unread = sum(1 for m in S["messages"].values() if not m["seen"] and m["mailbox"] == "inbox")
            for token in S["devices"]:
                if token in S["sim"]:
                    S["sim"][token].append({"apnsId": str(uuid.uuid4()).upper(), "pushType": "alert", "priority": 5,
                                            "collapseId": None,
                                            "payload": {"aps": {"content-available": 1, "badge": unread},
                                                        "acct": "alias-1", "st": state()}})
            LOCK.notify_all()

        def bump(mid):
            S["modseq"] += 1
            S["log"].append((S["modseq"], mid))

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def reply(self, status, body=None, headers=None):
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                if body is not None:
                    self.send_header("Content-Type", "application/json")
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def error(self, status, code):
                self.reply(status, {"error": code, "message": code})

            def body(self):
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n) or b"{}") if n else {}

            def bearer(self):
                auth = self.headers.get("Authorization", "")
                return auth[7:] if auth.startswith("Bearer ") else None

            def handle_any(self, method):
                url = urlparse(self.path)
                path, q = url.path, {k: v[0] for k, v in parse_qs(url.query).items()}
                with LOCK:
                    S["requests"].append({"method": method, "path": path, "query": q,
                                          "authorized": self.bearer() is not None,
                                          "lastEventID": self.headers.get("Last-Event-ID")})
                    for f in S["faults"]:
                        if path.startswith(f["path"]) and f["times"] > 0:
                            f["times"] -= 1
                            payload = self.body()
                            return self.reply(f["status"], f.get("body"), f.get("headers"))
                if path.startswith("/test/"):
                    return self.test(method, path)
                if path.startswith("/sim/"):
                    return self.sim(method, path)
                if path == "/v1/session" and method == "POST":
                    b = self.body()
                    if USERS.get(b.get("username")) != b.get("password"):
                        return self.error(401, "invalidCredentials")
                    token = secrets.token_hex(16)
                    with LOCK:
                        S["tokens"][token] = "alice"
                    return self.reply(201, {"accessToken": token, "accountId": "acct-1"})
                if path == "/v1/deliveries" and method == "POST":
                    if self.bearer() != DELIVERY:
                        return self.error(401, "unauthorized")
                    b = self.body()
                    with LOCK:
                        mid = "m%05d" % S["next"]
                        S["next"] += 1
                        bump(mid)
                        size = len(b["body"].encode())
                        S["messages"][mid] = {"id": mid, "mailbox": "inbox", "from": b["from"], "to": b["to"],
                                              "subject": b["subject"], "preview": b["body"][:40], "size": size,
                                              "receivedAt": 1700000000 + S["modseq"], "seen": False, "flagged": False,
                                              "body": b["body"]}
                        S["created"][mid] = S["modseq"]
                        signal_all()
                        return self.reply(201, {"id": mid, "state": state()})
                with LOCK:
                    if S["tokens"].get(self.bearer()) is None:
                        return self.error(401, "unauthorized")
                if path == "/v1/session" and method == "DELETE":
                    with LOCK:
                        S["tokens"].pop(self.bearer(), None)
                    return self.reply(204)
                if path == "/v1/devices" and method == "POST":
                    b = self.body()
                    with LOCK:
                        S["devices"][b["token"]] = b
                    return self.reply(201, {"token": b["token"], "alias": "alias-1"})
                if path.startswith("/v1/devices/") and method == "DELETE":
                    with LOCK:
                        S["devices"].pop(path.split("/")[-1], None)
                    return self.reply(204)
                if path == "/v1/messages" and method == "GET":
                    with LOCK:
                        ids = sorted(S["messages"])
                        start = int(q.get("cursor", "0"))
                        limit = int(q.get("limit", "50"))
                        page = ids[start:start + limit]
                        nxt = str(start + limit) if start + limit < len(ids) else None
                        return self.reply(200, {"messages": [wire(S["messages"][i]) for i in page], "state": state(),
                                                "nextCursor": nxt})
                if path.startswith("/v1/messages/"):
                    mid = path.split("/")[-1]
                    with LOCK:
                        m = S["messages"].get(mid)
                        if m is None:
                            return self.error(404, "notFound")
                        if method == "GET":
                            return self.reply(200, wire(m, full=True))
                        if method == "PATCH":
                            b = self.body()
                            for k in ("seen", "flagged", "mailbox"):
                                if k in b:
                                    m[k] = b[k]
                            bump(mid)
                            signal_all()
                            return self.reply(200, wire(m))
                        if method == "DELETE":
                            del S["messages"][mid]
                            bump(mid)
                            signal_all()
                            return self.reply(204)
                if path == "/jmap/eventsource" and method == "GET":
                    return self.event_source(q)
                if path == "/v1/changes" and method == "GET":
                    since = q.get("since", "")
                    parts = since.split("-")
                    if len(parts) != 2 or not parts[1].isdigit():
                        return self.error(400, "invalidState")
                    with LOCK:
                        n = int(parts[1])
                        if parts[0] != EPOCH or n < S["floor"] or n > S["modseq"]:
                            return self.error(400, "cannotCalculateChanges")
                        pending = [e for e in S["log"] if e[0] > n]
                        taken = pending[:int(q.get("max", "100"))]
                        more = len(taken) < len(pending)
                        new = taken[-1][0] if more else S["modseq"]
                        created, updated, destroyed, seen = [], [], [], set()
                        for _, mid in taken:
                            if mid in seen:
                                continue
                            seen.add(mid)
                            m = S["messages"].get(mid)
                            if m is None:
                                destroyed.append(mid)
                            elif S["created"][mid] > n:
                                created.append(wire(m))
                            else:
                                updated.append(wire(m))
                        return self.reply(200, {"oldState": since, "newState": "%s-%d" % (EPOCH, new), "hasMore": more,
                                                "created": created, "updated": updated, "destroyed": destroyed})
                return self.error(404, "notFound")

            def test(self, method, path):
                b = self.body()
                with LOCK:
                    if path == "/test/fault":
                        b.setdefault("times", 1)
                        S["faults"].append(b)
                    elif path == "/test/compact":
                        S["floor"] = S["modseq"]
                    elif path == "/test/revoke":
                        S["tokens"].clear()
                    elif path == "/test/drop-streams":
                        S["stream_epoch"] += 1
                        LOCK.notify_all()
                    elif path == "/test/drop-signals":
                        S["drop_signals"] = bool(b.get("on"))
                    elif path == "/test/requests":
                        return self.reply(200, S["requests"])
                    elif path == "/test/mailbox":
                        return self.reply(200, {"state": state(), "messages": [S["messages"][i] for i in sorted(S["messages"])],
                                                "devices": sorted(S["devices"])})
                return self.reply(200, {})

            def event_source(self, q):
                # JMAP's event source: a `state` event (id: the state) per change, a `ping` after each quiet interval,
                # and with Last-Event-ID naming another state the current one at once.
                ping = max(1, int(q.get("ping", "0") or "0"))
                last = self.headers.get("Last-Event-ID")
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-store")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                def change():
                    body = {"@type": "StateChange", "changed": {"acct-1": {"Email": state(), "Mailbox": state()}}}
                    return ("event: state\nid: %s\ndata: %s\n\n" % (state(), json.dumps(body))).encode()
                try:
                    with LOCK:
                        sent, epoch = S["modseq"], S["stream_epoch"]
                        first = change() if last is not None and last != state() else b": open\n\n"
                    self.wfile.write(first)
                    self.wfile.flush()
                    while True:
                        with LOCK:
                            changed = LOCK.wait_for(
                                lambda: S["modseq"] != sent or S["stream_epoch"] != epoch, timeout=ping)
                            if S["stream_epoch"] != epoch:
                                return
                            sent = S["modseq"]
                            data = change() if changed else b"event: ping\ndata: {\"interval\":%d}\n\n" % ping
                        self.wfile.write(data)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    return

            def sim(self, method, path):
                if path == "/sim/devices" and method == "POST":
                    self.body()
                    token = secrets.token_hex(32)
                    with LOCK:
                        S["sim"][token] = []
                    return self.reply(201, {"deviceToken": token})
                parts = path.split("/")
                if len(parts) == 5 and parts[4] == "notifications" and method == "GET":
                    token = parts[3]
                    with LOCK:
                        if token not in S["sim"]:
                            return self.error(404, "unknownDevice")
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Cache-Control", "no-cache")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.close_connection = True
                    try:
                        self.wfile.write(b": connected\n\n")
                        self.wfile.flush()
                        while True:
                            with LOCK:
                                LOCK.wait_for(lambda: S["sim"].get(token), timeout=1.0)
                                if token not in S["sim"]:
                                    return
                                events, S["sim"][token] = S["sim"][token], []
                            for e in events:
                                self.wfile.write(("data: %s\n\n" % json.dumps(e)).encode())
                            if not events:
                                self.wfile.write(b": heartbeat\n\n")
                            self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        return
                return self.error(404, "notFound")

            def do_GET(self): self.handle_any("GET")
            def do_POST(self): self.handle_any("POST")
            def do_PATCH(self): self.handle_any("PATCH")
            def do_DELETE(self): self.handle_any("DELETE")

        args = sys.argv[1:]
        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        if args:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(args[0], args[1])
            server.socket = context.wrap_socket(server.socket, server_side=True)
        print("PORT %d" % server.server_address[1], flush=True)
        server.serve_forever()
        """#

    /// A running fake backend.
    final class Process: Sendable {
        let child: ChildProcess
        let port: UInt16
        let baseURL: String
        let directory: TemporaryDirectory

        /// Starts the script; with `tls`, serves HTTPS with that certificate and key.
        init(tls: (certificatePEM: String, keyPEM: String)? = nil) throws {
            directory = try TemporaryDirectory(prefix: "mailsync-fake")
            let scriptPath = directory.path("fake_backend.py")
            try script.write(toFile: scriptPath, atomically: true, encoding: .utf8)
            var arguments = ["-u", scriptPath]
            if let tls {
                try tls.certificatePEM.write(toFile: directory.path("server.pem"), atomically: true, encoding: .utf8)
                try tls.keyPEM.write(toFile: directory.path("server.key"), atomically: true, encoding: .utf8)
                arguments += [directory.path("server.pem"), directory.path("server.key")]
            }
            let python = TestEnvironment.python
            guard FileManager.default.isExecutableFile(atPath: python) else {
                throw FakeBackendError("Python not found at \(python): set SIGNALFETCH_PYTHON")
            }
            child = try ChildProcess(python, arguments, logDirectory: directory.url.path)
            guard child.waitForOutput(timeout: 20, { $0.contains("PORT ") }),
                let line = child.output.split(separator: "\n").first(where: { $0.hasPrefix("PORT ") }),
                let port = UInt16(line.dropFirst(5))
            else { throw FakeBackendError("the fake backend did not start: \(child.errorOutput)") }
            self.port = port
            baseURL = "\(tls == nil ? "http" : "https")://127.0.0.1:\(port)"
        }

        deinit { child.stop(signal: SIGKILL) }

        /// Calls a `/test/…` hook (over plain HTTP with curl, or with `--cacert` for TLS).
        @discardableResult
        func control(_ path: String, _ body: String = "{}", ca: String? = nil) throws -> String {
            var arguments = ["-sS", "-X", "POST", "-H", "Content-Type: application/json", "--data", body]
            if let ca { arguments += ["--cacert", ca] }
            let result = try Subprocess.run("/usr/bin/curl", arguments + [baseURL + path])
            guard result.status == 0 else { throw FakeBackendError("curl \(path) failed: \(result.stderr)") }
            return result.stdout
        }

        /// Makes the next `times` requests whose path starts with `path` answer `status` with `body`.
        func fault(_ path: String, status: Int, body: String = "null", headers: String = "{}", times: Int = 1) throws {
            try control(
                "/test/fault",
                #"{"path":"\#(path)","status":\#(status),"body":\#(body),"headers":\#(headers),"times":\#(times)}"#)
        }

        /// The server's mailbox: `state` and the messages with bodies.
        func mailbox() throws -> (state: String, messages: [[String: Any]], devices: [String]) {
            let object =
                try JSONSerialization.jsonObject(with: Data(try control("/test/mailbox").utf8)) as? [String: Any]
            return (
                object?["state"] as? String ?? "", object?["messages"] as? [[String: Any]] ?? [],
                object?["devices"] as? [String] ?? []
            )
        }

        /// Every request the backend has seen: method, path, query and whether it carried a bearer token.
        func requests() throws -> [[String: Any]] {
            (try JSONSerialization.jsonObject(with: Data(try control("/test/requests").utf8)) as? [[String: Any]]) ?? []
        }
    }
}

struct FakeBackendError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
