import Foundation
import OpenSSLCrypto
import TestSupport
import Testing

/// A scripted HTTP/2 APNs stand-in (Python `h2` over asyncio): it answers each device token with the status
/// and reason the test chose, records every request, and counts the most streams open at once. `GET /stats`
/// returns what it recorded.
final class ScriptedAPNsServer {
    /// How the server answers one device token.
    struct Answer: Encodable {
        var status: Int = 200
        var reason: String?
        var retryAfter: String?
        var timestamp: Int64?
        var uniqueId: String?
        /// Answer `ExpiredProviderToken` to the first bearer token seen for this device, 200 to any other.
        var expireFirstToken: Bool?
    }

    /// One recorded request.
    struct RecordedRequest: Decodable {
        var path: String
        var method: String
        var headers: [String: String]
        var body: String
        var clientCert: Bool
    }

    struct Stats: Decodable {
        var maxConcurrent: Int
        var requests: [RecordedRequest]
        /// The number of requests (set in summaries, which leave `requests` empty).
        var count: Int?
    }

    let directory: TemporaryDirectory
    let process: ChildProcess
    let port: Int
    let tls: Bool
    /// The CA that signed the server certificate (and the client certificate).
    let caFile: String
    /// A client certificate and key signed by the CA.
    let clientCertificateFile: String
    let clientKeyFile: String

    var baseURL: String { (tls ? "https" : "http") + "://127.0.0.1:\(port)" }

    init(
        answers: [String: Answer] = [:], tls: Bool = true, maxStreams: Int = 1000, delay: Double = 0,
        requireClientCertificateCA: Bool = false
    ) throws {
        let python = TestEnvironment.python
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw ServerError("Python not found at \(python); set SIGNALFETCH_PYTHON to a venv with h2")
        }
        directory = try TemporaryDirectory(prefix: "apns-server")
        self.tls = tls
        let authority = try DevCertificates.makeCertificateAuthority(commonName: "APNs test CA")
        let server = try DevCertificates.makeServerCertificate(hosts: ["127.0.0.1", "localhost"], signedBy: authority)
        let client = try DevCertificates.makeServerCertificate(hosts: ["provider.test"], signedBy: authority)
        caFile = directory.path("ca.pem")
        clientCertificateFile = directory.path("client.pem")
        clientKeyFile = directory.path("client.key")
        try authority.certificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        try server.certificatePEM.write(toFile: directory.path("server.pem"), atomically: true, encoding: .utf8)
        try server.privateKeyPEM.write(toFile: directory.path("server.key"), atomically: true, encoding: .utf8)
        try client.certificatePEM.write(toFile: clientCertificateFile, atomically: true, encoding: .utf8)
        try client.privateKeyPEM.write(toFile: clientKeyFile, atomically: true, encoding: .utf8)
        try JSONEncoder().encode(answers).write(to: URL(fileURLWithPath: directory.path("script.json")))
        try Self.source.write(toFile: directory.path("server.py"), atomically: true, encoding: .utf8)

        var arguments = [
            directory.path("server.py"), "--script", directory.path("script.json"),
            "--max-streams", String(maxStreams), "--delay", String(delay),
        ]
        if tls {
            arguments += ["--cert", directory.path("server.pem"), "--key", directory.path("server.key")]
            if requireClientCertificateCA { arguments += ["--client-ca", caFile] }
        }
        process = try ChildProcess(python, arguments, logDirectory: directory.url.path)
        guard process.waitForOutput(timeout: 20, { $0.contains("PORT ") }),
            let line = process.output.split(separator: "\n").first(where: { $0.hasPrefix("PORT ") }),
            let port = Int(line.dropFirst(5).trimmingCharacters(in: .whitespaces))
        else {
            throw ServerError("the scripted server did not start: \(process.errorOutput)")
        }
        self.port = port
    }

    deinit { process.stop(signal: SIGKILL) }

    /// What the server recorded so far (fetched with curl over HTTP/2); a summary leaves out the requests.
    func stats(summary: Bool = false) throws -> Stats {
        guard let curl = Subprocess.which("curl") else { throw ServerError("curl not found on PATH") }
        var arguments = ["-sS", "--fail", "--max-time", "10"]
        arguments += tls ? ["--http2", "--cacert", caFile] : ["--http2-prior-knowledge"]
        let result = try Subprocess.run(curl, arguments + [baseURL + (summary ? "/stats?summary" : "/stats")])
        guard result.status == 0 else {
            throw ServerError("curl /stats failed: \(result.stderr); server log: \(process.errorOutput)")
        }
        return try JSONDecoder().decode(Stats.self, from: Data(result.stdout.utf8))
    }

    struct ServerError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    static let source = #"""
        import asyncio, json, ssl, sys, uuid, argparse
        import h2.config, h2.connection, h2.events, h2.settings

        p = argparse.ArgumentParser()
        p.add_argument("--cert"); p.add_argument("--key"); p.add_argument("--client-ca")
        p.add_argument("--script"); p.add_argument("--max-streams", type=int, default=1000)
        p.add_argument("--delay", type=float, default=0.0)
        args = p.parse_args()
        script = json.load(open(args.script)) if args.script else {}
        stats = {"maxConcurrent": 0, "requests": []}
        active = 0
        first_auth = {}

        waiters = {}

        async def respond(conn, writer, sid, status, headers, body):
            hs = [(":status", str(status))] + headers + [("content-length", str(len(body)))]
            conn.send_headers(sid, hs, end_stream=not body)
            while body:
                room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
                if room <= 0:
                    event = asyncio.Event()
                    waiters.setdefault(id(conn), []).append(event)
                    writer.write(conn.data_to_send())
                    await event.wait()
                    continue
                chunk, body = body[:room], body[room:]
                conn.send_data(sid, chunk, end_stream=not body)
            writer.write(conn.data_to_send())

        async def handle(conn, writer, sid, headers, body, peer_cert):
            global active
            path = headers.get(":path", "")
            if path.startswith("/stats"):
                body = stats if path == "/stats" else {"maxConcurrent": stats["maxConcurrent"], "requests": []}
                if path != "/stats": body["count"] = len(stats["requests"])
                await respond(conn, writer, sid, 200, [("content-type", "application/json")], json.dumps(body).encode())
                return
            stats["requests"].append({"path": path, "method": headers.get(":method"),
                "headers": {k: v for k, v in headers.items() if not k.startswith(":")},
                "body": body.decode("utf-8", "replace"), "clientCert": peer_cert})
            if args.delay: await asyncio.sleep(args.delay)
            token = path.rsplit("/", 1)[-1]
            entry = script.get(token, {})
            apns_id = headers.get("apns-id") or str(uuid.uuid4())
            out = [("apns-id", apns_id)]
            status = entry.get("status", 200)
            reason = entry.get("reason")
            if entry.get("expireFirstToken"):
                auth = headers.get("authorization", "")
                first = first_auth.setdefault(token, auth)
                status, reason = (403, "ExpiredProviderToken") if auth == first else (200, None)
            if status == 200:
                if "uniqueId" in entry: out.append(("apns-unique-id", entry["uniqueId"]))
                await respond(conn, writer, sid, 200, out, b"")
            else:
                if "retryAfter" in entry: out.append(("retry-after", str(entry["retryAfter"])))
                obj = {"reason": reason}
                if "timestamp" in entry: obj["timestamp"] = entry["timestamp"]
                await respond(conn, writer, sid, status, out + [("content-type", "application/json")], json.dumps(obj).encode())
            active -= 1

        async def client(reader, writer):
            global active
            sslobj = writer.get_extra_info("ssl_object")
            peer_cert = bool(sslobj and sslobj.getpeercert())
            conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
            conn.local_settings = h2.settings.Settings(client=False, initial_values={
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: args.max_streams})
            conn.initiate_connection()
            writer.write(conn.data_to_send())
            pending = {}
            tasks = set()
            while True:
                data = await reader.read(65536)
                if not data: break
                try:
                    events = conn.receive_data(data)
                except Exception as e:
                    print("protocol error", e, file=sys.stderr, flush=True)
                    writer.write(conn.data_to_send()); break
                for ev in events:
                    if isinstance(ev, h2.events.RequestReceived):
                        hs = dict(ev.headers)
                        pending[ev.stream_id] = [hs, b""]
                        if not hs.get(":path", "").startswith("/stats"):
                            active += 1
                            stats["maxConcurrent"] = max(stats["maxConcurrent"], active)
                    elif isinstance(ev, h2.events.DataReceived):
                        pending[ev.stream_id][1] += ev.data
                        conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    elif isinstance(ev, h2.events.StreamEnded):
                        hs, body = pending.pop(ev.stream_id)
                        t = asyncio.ensure_future(handle(conn, writer, ev.stream_id, hs, body, peer_cert))
                        tasks.add(t); t.add_done_callback(tasks.discard)
                    elif isinstance(ev, h2.events.WindowUpdated):
                        for event in waiters.pop(id(conn), []): event.set()
                writer.write(conn.data_to_send())
            waiters.pop(id(conn), None)
            writer.close()

        async def main():
            ctx = None
            if args.cert:
                ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
                ctx.load_cert_chain(args.cert, args.key)
                ctx.set_alpn_protocols(["h2"])
                if args.client_ca:
                    ctx.load_verify_locations(args.client_ca)
                    ctx.verify_mode = ssl.CERT_OPTIONAL
            server = await asyncio.start_server(client, "127.0.0.1", 0, ssl=ctx)
            print("PORT", server.sockets[0].getsockname()[1], flush=True)
            async with server:
                await server.serve_forever()

        asyncio.run(main())
        """#
}
