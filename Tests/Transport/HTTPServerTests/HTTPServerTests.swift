import Foundation
import HTTPServer
import Locking
import TestSupport
import Testing

@Suite("HTTPServer", .serialized)
struct HTTPServerTests {
    @Test("path parameters, percent-decoded query and literal-over-parameter routing")
    func routingWithParameters() async throws {
        let server = try startServer()
        let base = "http://127.0.0.1:\(server.port)"
        let response = try await curlResponse(["\(base)/v1/messages/a%20b?q=x%26y&name=J%C3%BCrg+en"])
        #expect(response.status == 200)
        #expect(response.headers["content-type"] == "application/json")
        let json = try response.json()
        #expect(json["id"] as? String == "a b")
        #expect(json["q"] as? String == "x&y")
        #expect(json["name"] as? String == "Jürg en")
        #expect(json["route"] as? String == "param")
        let literal = try await curlResponse(["\(base)/v1/messages/special"])
        #expect(try literal.json()["route"] as? String == "literal")
        let patched = try await curlResponse(["-X", "PATCH", "\(base)/v1/messages/42"])
        #expect(try patched.json()["patched"] as? String == "42")
        await server.shutdown()
    }

    @Test("headers are case-insensitive and the remote address is known")
    func headersAndRemoteAddress() async throws {
        let server = try startServer()
        let response = try await curlResponse([
            "-H", "x-custom-HEADER: value-1", "-A", "probe/1.0", "http://127.0.0.1:\(server.port)/headers",
        ])
        let json = try response.json()
        #expect(json["custom"] as? String == "value-1")
        #expect(json["userAgent"] as? String == "probe/1.0")
        #expect(json["remote"] as? String == "127.0.0.1")
        await server.shutdown()
    }

    @Test("unknown path is 404 notFound, wrong method is 405 with Allow")
    func notFoundAndMethodNotAllowed() async throws {
        let server = try startServer()
        let base = "http://127.0.0.1:\(server.port)"
        let missing = try await curlResponse(["\(base)/nothing/here"])
        #expect(missing.status == 404)
        #expect(try missing.json()["error"] as? String == "notFound")
        #expect(try missing.json()["message"] is String)
        let wrong = try await curlResponse(["-X", "DELETE", "\(base)/v1/messages/7"])
        #expect(wrong.status == 405)
        #expect(try wrong.json()["error"] as? String == "methodNotAllowed")
        #expect(wrong.headers["allow"] == "GET, HEAD, PATCH")
        await server.shutdown()
    }

    @Test("JSON round trip, invalid JSON and wrong shape give 400 without echoing the body")
    func jsonRoundTrip() async throws {
        let server = try startServer()
        let url = "http://127.0.0.1:\(server.port)/echo"
        let json = ["-H", "Content-Type: application/json", "-X", "POST", url, "--data-binary"]
        let created = try await curlResponse(json + [#"{"name":"ada","count":41}"#])
        #expect(created.status == 201)
        let greeting = try JSONDecoder().decode(Greeting.self, from: Data(created.body.utf8))
        #expect(greeting == Greeting(name: "ADA", count: 42))

        let broken = try await curlResponse(json + [#"{"name":"SECRET-CONTENT","#])
        #expect(broken.status == 400)
        #expect(try broken.json()["error"] as? String == "invalidJSON")
        #expect(!broken.body.contains("SECRET-CONTENT"))

        let shape = try await curlResponse(json + [#"{"name":"SECRET-CONTENT"}"#])
        #expect(shape.status == 400)
        #expect(try shape.json()["error"] as? String == "invalidRequest")
        #expect(try (shape.json()["message"] as? String)?.contains("count") == true)
        #expect(!shape.body.contains("SECRET-CONTENT"))

        let typed = try await curlResponse(json + [#"{"name":"x","count":"SECRET-CONTENT"}"#])
        #expect(try typed.json()["error"] as? String == "invalidRequest")
        #expect(!typed.body.contains("SECRET-CONTENT"))
        await server.shutdown()
    }

    @Test("HTTPError renders its status and code; other errors become a generic 500")
    func errorRendering() async throws {
        let logged = Collector<String>()
        let server = try startServer { $0.errorLog = { logged.append($0) } }
        let base = "http://127.0.0.1:\(server.port)"
        let forbidden = try await curlResponse(["\(base)/forbidden"])
        #expect(forbidden.status == 403)
        #expect(try forbidden.json()["error"] as? String == "forbidden")
        let failed = try await curlResponse(["\(base)/fail"])
        #expect(failed.status == 500)
        #expect(try failed.json()["error"] as? String == "internalError")
        #expect(!failed.body.contains("ProbeError"))
        #expect(logged.all.contains { $0.contains("ProbeError") })
        await server.shutdown()
    }

    @Test("curl reuses one keep-alive connection for two requests")
    func keepAliveWithCurl() async throws {
        let server = try startServer()
        let url = "http://127.0.0.1:\(server.port)/hello"
        let result = try await curl(["-v", url, url])
        #expect(result.status == 0)
        #expect(result.stdout == "hellohello")
        #expect(result.stderr.contains("Re-using existing connection"), "\(result.stderr)")
        await server.shutdown()
    }

    @Test("python httpx reuses one connection for a GET and a POST")
    func keepAliveWithHTTPX() async throws {
        let server = try startServer()
        let result = try await httpxClient(["http://127.0.0.1:\(server.port)"])
        #expect(result["get"] as? Int == 200)
        #expect(result["post"] as? Int == 201)
        #expect((result["echo"] as? [String: Any])?["count"] as? Int == 2)
        #expect(result["oneConnection"] as? Bool == true)
        await server.shutdown()
    }

    @Test("a body over the limit gets 413 payloadTooLarge and the server keeps serving")
    func bodyTooLarge() async throws {
        let server = try startServer { $0.maxBodySize = 1024 }
        let url = "http://127.0.0.1:\(server.port)/echo"
        let directory = try TemporaryDirectory()
        let big = directory.path("big.json")
        try Data(repeating: UInt8(ascii: "a"), count: 4000).write(to: URL(fileURLWithPath: big))
        let huge = directory.path("huge.json")
        try Data(repeating: UInt8(ascii: "a"), count: 3 << 20).write(to: URL(fileURLWithPath: huge))

        let declared = try await curlResponse(["-X", "POST", url, "--data-binary", "@\(big)"])
        #expect(declared.status == 413)
        #expect(try declared.json()["error"] as? String == "payloadTooLarge")

        let expect100 = try await curlResponse(["-X", "POST", url, "--data-binary", "@\(huge)"])
        #expect(expect100.status == 413)

        let chunked = try await curlResponse([
            "-X", "POST", "-H", "Transfer-Encoding: chunked", url, "--data-binary", "@\(big)",
        ])
        #expect(chunked.status == 413)
        #expect(try chunked.json()["error"] as? String == "payloadTooLarge")

        let fine = try await curlResponse(["-X", "POST", url, "--data-binary", #"{"name":"a","count":1}"#])
        #expect(fine.status == 201)
        await server.shutdown()
    }

    @Test("malformed requests get a 4xx or a close, and other clients are still served")
    func malformedRequests() async throws {
        let server = try startServer { $0.connectionMemoryLimit = 16 * 1024 }
        let port = server.port
        let garbage: [String] = [
            "GARBAGE\r\n\r\n",
            "GET /hello HTTP/1.1\r\nHost: x\r\nThis header has no colon\r\n\r\n",
            "GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "b", count: 64 * 1024))\r\n\r\n",
            "GET /hello HTTP/9.9\r\nHost: x\r\n\r\n",
            "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n",
            "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\nxx\r\n",
        ]
        for request in garbage {
            let (text, end) = try await offPool { () -> (String, RawSocket.ReadEnd) in
                let socket = try RawSocket(port: port, receiveTimeout: 5)
                socket.send(request)
                return socket.read { $0.contains("\r\n\r\n") }
            }
            let status = text.split(separator: " ").dropFirst().first.flatMap { Int($0) }
            // 4xx, or 505 for an unsupported HTTP version, or a plain close.
            let refused = status.map { (400..<500).contains($0) || $0 == 505 } ?? false
            let acceptable = refused || (text.isEmpty && end != .timeout)
            #expect(
                acceptable,
                "request \(request.prefix(40).debugDescription) got \(text.prefix(80).debugDescription) \(end)")
        }
        let ok = try await curlResponse(["http://127.0.0.1:\(port)/hello"])
        #expect(ok.status == 200)
        await server.shutdown()
    }

    @Test("requests two parsers could frame differently are refused with 400 at once, and the connection closed")
    func ambiguousFramingIsRefused() async throws {
        let server = try startServer()
        let port = server.port
        let ambiguous: [String: String] = [
            "conflicting Content-Length":
                "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\n{}",
            "repeated Content-Length":
                "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
            "Content-Length list": "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2, 2\r\n\r\n{}",
            "Content-Length and Transfer-Encoding":
                "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n0\r\n\r\n",
            "unknown Transfer-Encoding": "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n{}",
            "chunked twice": "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
            "no Host": "GET /hello HTTP/1.1\r\n\r\n",
            "two Hosts": "GET /hello HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
            "space before the colon": "GET /hello HTTP/1.1\r\nHost: x\r\nX-A : b\r\n\r\n",
            "space in a field name": "GET /hello HTTP/1.1\r\nHost: x\r\nX A: b\r\n\r\n",
        ]
        // A request appended after each one must never be answered: the refusal closes the connection.
        let appended = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"
        for (name, request) in ambiguous.sorted(by: { $0.key < $1.key }) {
            // A refusal comes at once; the body that never arrives is not waited for (the timeout is far off).
            let (text, end) = try await offPool { () -> (String, RawSocket.ReadEnd) in
                let socket = try RawSocket(port: port, receiveTimeout: 5)
                socket.send(request + appended)
                return socket.read()
            }
            #expect(text.hasPrefix("HTTP/1.1 400 "), "\(name): \(text.prefix(80).debugDescription)")
            #expect(end == .eof || end == .error(ECONNRESET), "\(name): the connection stayed open (\(end))")
            // libmicrohttpd 0.9.75 writes the status line and head of its own refusals twice; any other status
            // is the appended request's answer.
            let statuses = text.components(separatedBy: "HTTP/1.1 ").dropFirst().map { $0.prefix(3) }
            #expect(statuses.allSatisfy { $0 == "400" }, "\(name): the appended request was answered: \(text)")
        }
        // HTTP/1.0 needs no Host; a well-formed HTTP/1.1 request is answered as before.
        let old = try await offPool { () -> String in
            let socket = try RawSocket(port: port, receiveTimeout: 5)
            socket.send("GET /hello HTTP/1.0\r\n\r\n")
            return socket.read { $0.contains("\r\n\r\n") }.text
        }
        #expect(old.hasPrefix("HTTP/1.1 200 "))
        #expect(try await curlResponse(["http://127.0.0.1:\(port)/hello"]).status == 200)
        await server.shutdown()
    }

    @Test("a client that stops mid-header is disconnected after the idle timeout")
    func idleTimeout() async throws {
        let server = try startServer { $0.idleTimeoutSeconds = 1 }
        let port = server.port
        let end = try await offPool { () -> RawSocket.ReadEnd in
            let socket = try RawSocket(port: port, receiveTimeout: 15)
            socket.send("GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Partial: ")
            return socket.read().end
        }
        #expect(end == .eof || end == .error(ECONNRESET))
        let ok = try await curlResponse(["http://127.0.0.1:\(port)/hello"])
        #expect(ok.status == 200)
        await server.shutdown()
    }

    @Test("a handler slower than the request timeout gets 503 timeout")
    func requestTimeout() async throws {
        let server = try startServer { $0.requestTimeout = .milliseconds(300) }
        let response = try await curlResponse(["http://127.0.0.1:\(server.port)/hang"])
        #expect(response.status == 503)
        #expect(try response.json()["error"] as? String == "timeout")
        await server.shutdown()
    }

    @Test("the access log has method, path, status and address, never bodies or credentials")
    func accessLog() async throws {
        let entries = Collector<HTTPServer.AccessLogEntry>()
        let server = try startServer { $0.accessLog = { entries.append($0) } }
        let url = "http://127.0.0.1:\(server.port)/echo?token=QUERY-SECRET"
        let response = try await curlResponse([
            "-X", "POST", "-H", "Authorization: Bearer AUTH-SECRET", url,
            "--data-binary", #"{"name":"BODY-SECRET","count":1}"#,
        ])
        #expect(response.status == 201)
        #expect(await eventually { entries.count >= 1 })
        let entry = try #require(entries.all.first)
        #expect(entry.method == "POST")
        #expect(entry.path == "/echo")
        #expect(entry.status == 201)
        #expect(entry.remoteAddress == "127.0.0.1")
        let line = "\(entry)"
        for secret in ["QUERY-SECRET", "AUTH-SECRET", "BODY-SECRET", "Bearer"] { #expect(!line.contains(secret)) }
        await server.shutdown()
    }

    @Test("start-up failures are descriptive errors: port in use, bad certificate, missing file")
    func startupFailures() async throws {
        let first = try startServer()
        #expect {
            _ = try startServer { $0.port = first.port }
        } throws: { error in
            guard case .startFailed(let reason) = error as? HTTPServer.StartError else { return false }
            return reason.lowercased().contains("bind") || reason.lowercased().contains("in use")
        }
        await first.shutdown()

        let directory = try TemporaryDirectory()
        try "not a certificate".write(toFile: directory.path("bad.pem"), atomically: true, encoding: .utf8)
        #expect {
            _ = try startServer {
                $0.tls = .init(certificatePath: directory.path("bad.pem"), privateKeyPath: directory.path("bad.pem"))
            }
        } throws: { error in
            guard case .startFailed = error as? HTTPServer.StartError else { return false }
            return true
        }
        #expect(throws: HTTPServer.StartError.self) {
            _ = try startServer {
                $0.tls = .init(certificatePath: directory.path("missing.pem"), privateKeyPath: directory.path("x"))
            }
        }
    }

    @Test("graceful shutdown lets an in-flight handler finish, then refuses connections")
    func gracefulShutdown() async throws {
        let started = Flag()
        let server = try startServer(router: makeTestRouter(slowStarted: started))
        let port = server.port
        async let slow = curlResponse(["http://127.0.0.1:\(port)/slow"])
        #expect(await eventually { started.isSet })
        await server.shutdown()
        let response = try await slow
        #expect(response.status == 200)
        #expect(response.body == "slow done")
        let refused = try await curl(["http://127.0.0.1:\(port)/hello"])
        #expect(refused.status != 0)
    }

    @Test("shutting down while connections keep arriving never aborts the process, 100 times over")
    func shutdownUnderArrivingConnections() async throws {
        for _ in 0..<100 {
            let server = try startServer { $0.shutdownGracePeriod = .milliseconds(50) }
            let (port, stop, connected) = (server.port, Flag(), Flag())
            // Connections arrive on every worker thread while the server drains and stops.
            Thread.start(named: "test-connector") {
                while !stop.isSet {
                    guard let socket = try? RawSocket(port: port, receiveTimeout: 1) else { continue }
                    socket.send("GET /hello HTTP/1.1\r\nHost: test\r\n\r\n")
                    connected.set()
                }
            }
            #expect(await eventually { connected.isSet })
            await server.shutdown()
            stop.set()
            #expect(server.inFlightCount == 0)
        }
    }

    @Test("shutdown answers a handler that outlives the grace period with 503 shuttingDown")
    func shutdownAbandonsSlowHandler() async throws {
        let server = try startServer { $0.shutdownGracePeriod = .milliseconds(200) }
        let port = server.port
        async let hanging = curlResponse(["http://127.0.0.1:\(port)/hang"])
        #expect(await eventually { server.inFlightCount == 1 })
        await server.shutdown()
        let response = try await hanging
        #expect(response.status == 503)
        #expect(try response.json()["error"] as? String == "shuttingDown")
    }

    @Test("binds host names and IPv6 literals and reports the bound port")
    func bindsHosts() async throws {
        let v4 = try startServer { $0.host = "localhost" }
        #expect(v4.port != 0)
        #expect(try await curlResponse(["http://127.0.0.1:\(v4.port)/hello"]).body == "hello")
        await v4.shutdown()
        let v6 = try startServer { $0.host = "::1" }
        let response = try await curlResponse(["http://[::1]:\(v6.port)/headers"])
        #expect(try response.json()["remote"] as? String == "::1")
        await v6.shutdown()
        #expect(throws: HTTPServer.StartError.invalidHost("no-such-host.invalid")) {
            _ = try startServer { $0.host = "no-such-host.invalid" }
        }
    }
}
