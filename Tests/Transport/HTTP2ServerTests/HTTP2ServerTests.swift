import Foundation
import HTTP2Server
import Locking
import TestSupport
import Testing

@Suite("HTTP2Server", .serialized)
struct HTTP2ServerTests {
    @Test("curl over TLS negotiates h2 with ALPN and gets the body")
    func curlOverTLS() async throws {
        let certificates = try await TestCertificates.make()
        let server = try startServer(tls: certificates.tls)
        let result = try await run(
            try tool("curl"),
            [
                "-sS", "--http2", "--cacert", certificates.caPath, "-w", "\n%{http_version} %{http_code}",
                "https://localhost:\(server.port)/hello",
            ])
        #expect(result.status == 0, "curl failed: \(result.stderr)")
        #expect(result.stdout == "hello over h2\n2 200")
        await server.shutdown()
    }

    @Test("curl with prior knowledge speaks h2c and posts a body")
    func curlCleartext() async throws {
        let server = try startServer(tls: nil)
        let result = try await run(
            try tool("curl"),
            [
                "-sS", "--http2-prior-knowledge", "--data-binary", "signal-then-fetch", "-D", "-",
                "http://127.0.0.1:\(server.port)/echo",
            ])
        #expect(result.status == 0, "curl failed: \(result.stderr)")
        #expect(result.stdout.hasPrefix("HTTP/2 200"))
        #expect(result.stdout.contains("x-body-length: 17"))
        #expect(result.stdout.hasSuffix("signal-then-fetch"))
        await server.shutdown()
    }

    @Test("the handler sees method, path, authority, scheme and lowercase headers")
    func requestFields() async throws {
        let server = try startServer(tls: nil)
        let result = try await run(
            try tool("curl"),
            ["-sS", "--http2-prior-knowledge", "-A", "probe/1", "http://127.0.0.1:\(server.port)/info?x=1"])
        #expect(result.status == 0, "curl failed: \(result.stderr)")
        let info = try JSONDecoder().decode([String: String].self, from: Data(result.stdout.utf8))
        #expect(info["method"] == "GET")
        #expect(info["path"] == "/info?x=1")
        #expect(info["authority"] == "127.0.0.1:\(server.port)")
        #expect(info["scheme"] == "http")
        #expect(info["user-agent"] == "probe/1")
        await server.shutdown()
    }

    @Test("a TLS client that offers no ALPN is spoken to in HTTP/2")
    func tlsWithoutALPN() async throws {
        let certificates = try await TestCertificates.make()
        let server = try startServer(tls: certificates.tls)
        let script = TestEnvironment.peer("h2_no_alpn.py")
        let result = try await run(try python(), [script, String(server.port), certificates.caPath])
        #expect(result.status == 0, "script failed: \(result.stderr)")
        #expect(result.stdout == "alpn None\nstatus 200\nbody hello over h2\n")
        await server.shutdown()
    }

    @Test("a TLS client that offers only http/1.1 is refused")
    func http1OnlyALPNRefused() async throws {
        let certificates = try await TestCertificates.make()
        let server = try startServer(tls: certificates.tls)
        let result = try await run(
            try tool("curl"),
            ["-sS", "--http1.1", "--cacert", certificates.caPath, "https://localhost:\(server.port)/hello"])
        #expect(result.status != 0)
        #expect(!result.stdout.contains("hello over h2"))
        // The server keeps serving h2 clients.
        let again = try await run(
            try tool("curl"),
            ["-sS", "--http2", "--cacert", certificates.caPath, "https://localhost:\(server.port)/hello"])
        #expect(again.stdout == "hello over h2")
        await server.shutdown()
    }

    @Test("httpx with HTTP/2 over TLS and over h2c")
    func httpxClients() async throws {
        let certificates = try await TestCertificates.make()
        let script = TestEnvironment.peer("h2_httpx_client.py")
        let tlsServer = try startServer(tls: certificates.tls)
        let overTLS = try await run(
            try python(), [script, "tls", "https://localhost:\(tlsServer.port)/echo", certificates.caPath])
        #expect(overTLS.status == 0, "script failed: \(overTLS.stderr)")
        #expect(overTLS.stdout == "HTTP/2 200 \(String(repeating: "ping", count: 8))\n")
        await tlsServer.shutdown()

        let cleartextServer = try startServer(tls: nil)
        let cleartext = try await run(try python(), [script, "h2c", "http://127.0.0.1:\(cleartextServer.port)/echo"])
        #expect(cleartext.status == 0, "script failed: \(cleartext.stderr)")
        #expect(cleartext.stdout == "HTTP/2 200 \(String(repeating: "ping", count: 8))\n")
        await cleartextServer.shutdown()
    }

    @Test("h2load: 2000 requests, 100 concurrent streams on one connection", arguments: [false, true])
    func manyConcurrentStreams(tls: Bool) async throws {
        let certificates = try await TestCertificates.make()
        let server = try startServer(tls: tls ? certificates.tls : nil)
        let url = "\(tls ? "https" : "http")://127.0.0.1:\(server.port)/hello"
        let result = try await run(try tool("h2load"), ["-n", "2000", "-c", "1", "-m", "100", url])
        #expect(result.status == 0, "h2load failed: \(result.stderr)")
        let line = result.stdout.split(separator: "\n").first { $0.hasPrefix("requests:") }.map(String.init) ?? ""
        #expect(line.contains("2000 succeeded"), "h2load summary: \(line)")
        #expect(line.contains(" 0 failed"), "h2load summary: \(line)")
        if tls { #expect(result.stdout.contains("Application protocol: h2")) }
        #expect(await eventually { server.metrics.streamsServed >= 2000 })
        await server.shutdown()
    }

    @Test("SETTINGS advertises the configured SETTINGS_MAX_CONCURRENT_STREAMS")
    func settingsAdvertised() async throws {
        let defaults = try startServer(tls: nil)
        let standard = try await run(try tool("nghttp"), ["-v", "http://127.0.0.1:\(defaults.port)/hello"])
        #expect(standard.stdout.contains("[SETTINGS_MAX_CONCURRENT_STREAMS(0x03):1000]"))
        await defaults.shutdown()

        let custom = try startServer(tls: nil) { $0.maxConcurrentStreams = 77 }
        let result = try await run(try tool("nghttp"), ["-v", "http://127.0.0.1:\(custom.port)/hello"])
        #expect(result.status == 0, "nghttp failed: \(result.stderr)")
        #expect(result.stdout.contains("[SETTINGS_MAX_CONCURRENT_STREAMS(0x03):77]"))
        await custom.shutdown()
    }

    @Test("a body over the limit gets 413, with or without content-length")
    func oversizedBody() async throws {
        let directory = try TemporaryDirectory(prefix: "h2server-body")
        let server = try startServer(tls: nil) { $0.maxRequestBodySize = 64 * 1024 }
        let big = directory.path("big.bin")
        try Data(repeating: 0x61, count: 1 << 20).write(to: URL(fileURLWithPath: big))
        let declared = try await run(
            try tool("curl"),
            [
                "-sS", "--http2-prior-knowledge", "--data-binary", "@\(big)", "-w", "\n%{http_code}",
                "http://127.0.0.1:\(server.port)/echo",
            ])
        #expect(declared.stdout.hasSuffix("\n413"), "curl: \(declared.stdout) \(declared.stderr)")
        #expect(declared.stdout.contains("PayloadTooLarge"))

        let script = TestEnvironment.peer("h2_streaming_upload.py")
        let streamed = try await run(
            try python(), [script, "http://127.0.0.1:\(server.port)/echo", String(1 << 20)])
        #expect(streamed.stdout.hasPrefix("413 "), "upload: \(streamed.stdout) \(streamed.stderr)")

        // A body within the limit still goes through, on the same server.
        let small = try await run(
            try tool("curl"),
            ["-sS", "--http2-prior-knowledge", "--data-binary", "fits", "http://127.0.0.1:\(server.port)/echo"])
        #expect(small.stdout == "fits")
        #expect(server.metrics.requestsTooLarge >= 2)
        await server.shutdown()
    }

    @Test("garbage instead of the preface closes the connection; the server keeps serving")
    func malformedBytes() async throws {
        let certificates = try await TestCertificates.make()
        let garbage = Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n\u{1}\u{2}\u{3} definitely not HTTP/2".utf8)
        for tls in [false, true] {
            let server = try startServer(tls: tls ? certificates.tls : nil)
            #expect(await serverClosesAfterSending(garbage, port: server.port))
            let url = tls ? "https://localhost:\(server.port)/hello" : "http://127.0.0.1:\(server.port)/hello"
            let mode = tls ? ["--http2", "--cacert", certificates.caPath] : ["--http2-prior-knowledge"]
            let result = try await run(try tool("curl"), ["-sS"] + mode + [url])
            #expect(result.stdout == "hello over h2", "tls=\(tls): \(result.stderr)")
            #expect(await eventually { server.metrics.protocolErrors >= 1 })
            await server.shutdown()
        }
    }

    @Test("a client killed mid-stream is cleaned up and others are still served", arguments: [false, true])
    func abruptDisconnect(tls: Bool) async throws {
        let certificates = try await TestCertificates.make()
        let probe = Probe()
        let server = try startServer(tls: tls ? certificates.tls : nil, probe: probe)
        let base = tls ? "https://localhost:\(server.port)" : "http://127.0.0.1:\(server.port)"
        let mode = tls ? ["--http2", "--cacert", certificates.caPath] : ["--http2-prior-knowledge"]
        let victim = try BackgroundProcess(try tool("curl"), ["-sS"] + mode + ["\(base)/slow?ms=60000"])
        #expect(await eventually { probe.started == 1 })
        victim.kill()
        _ = await victim.wait()
        #expect(await eventually { server.metrics.connectionsOpen == 0 })
        #expect(await eventually { probe.cancelled == 1 })
        let result = try await run(try tool("curl"), ["-sS"] + mode + ["\(base)/hello"])
        #expect(result.stdout == "hello over h2")
        #expect(server.metrics.streamsReset >= 1)
        await server.shutdown()
    }

    @Test("the handler can ask for GOAWAY after its response")
    func goAwayOnRequest() async throws {
        let server = try startServer(tls: nil)
        let result = try await run(try tool("nghttp"), ["-v", "http://127.0.0.1:\(server.port)/goaway"])
        #expect(result.status == 0, "nghttp failed: \(result.stderr)")
        #expect(result.stdout.contains(":status: 200"))
        #expect(result.stdout.contains("recv GOAWAY frame"))
        #expect(result.stdout.contains("error_code=NO_ERROR"))
        #expect(await eventually { server.metrics.connectionsOpen == 0 })
        #expect(server.metrics.goAwaysSent == 1)
        // The server itself keeps accepting.
        let again = try await run(
            try tool("curl"), ["-sS", "--http2-prior-knowledge", "http://127.0.0.1:\(server.port)/hello"])
        #expect(again.stdout == "hello over h2")
        await server.shutdown()
    }

    @Test("shutdown sends GOAWAY, lets the in-flight stream finish, then stops listening")
    func gracefulShutdown() async throws {
        let probe = Probe()
        let server = try startServer(tls: nil, probe: probe)
        let port = server.port
        let client = try BackgroundProcess(try tool("nghttp"), ["-v", "http://127.0.0.1:\(port)/slow?ms=1500"])
        #expect(await eventually { probe.started == 1 })
        await server.shutdown(gracePeriod: .seconds(20))
        let result = await client.wait()
        #expect(result.stdout.contains("recv GOAWAY frame"), "nghttp: \(result.stdout)")
        #expect(result.stdout.contains(":status: 200"))
        #expect(result.stdout.contains("slept"))
        #expect(server.metrics.streamsServed == 1)
        #expect(server.metrics.connectionsOpen == 0)
        let refused = try await run(
            try tool("curl"), ["-sS", "--http2-prior-knowledge", "http://127.0.0.1:\(port)/hello"])
        #expect(refused.status != 0)
    }

    @Test("shutdown closes connections whose streams outlive the grace period")
    func boundedShutdown() async throws {
        let probe = Probe()
        let server = try startServer(tls: nil, probe: probe)
        let client = try BackgroundProcess(
            try tool("nghttp"), ["-v", "http://127.0.0.1:\(server.port)/slow?ms=600000"])
        #expect(await eventually { probe.started == 1 })
        await server.shutdown(gracePeriod: .milliseconds(300))
        let result = await client.wait()
        #expect(result.stdout.contains("recv GOAWAY frame"))
        #expect(!result.stdout.contains(":status: 200"))
        #expect(await eventually { probe.cancelled == 1 })
        #expect(server.metrics.connectionsOpen == 0)
    }

    @Test("an idle connection gets GOAWAY and is closed")
    func idleTimeout() async throws {
        let server = try startServer(tls: nil) { $0.idleTimeout = .seconds(1) }
        let script = TestEnvironment.peer("h2_idle.py")
        let result = try await run(try python(), [script, String(server.port)])
        #expect(result.status == 0, "script failed: \(result.stderr)")
        #expect(result.stdout == "status 200\ngoaway 0\nclosed\n")
        #expect(server.metrics.connectionsOpen == 0)
        await server.shutdown()
    }

    @Test("start-up failures are thrown with a description")
    func startupFailures() async throws {
        let certificates = try await TestCertificates.make()
        let first = try startServer(tls: nil)
        let clash = HTTP2Server(
            configuration: HTTP2ServerConfiguration(host: "127.0.0.1", port: first.port), handler: testHandler(Probe()))
        #expect(throws: HTTP2ServerError.addressInUse(host: "127.0.0.1", port: first.port)) { try clash.start() }
        await first.shutdown()

        // A port past 65535 is refused by the configuration's check; a host that does not resolve, by the binder.
        let farPort = HTTP2Server(
            configuration: HTTP2ServerConfiguration(host: "127.0.0.1", port: 70_000), handler: testHandler(Probe()))
        let portError = #expect(throws: HTTP2ServerError.self) { try farPort.start() }
        #expect(portError?.description.contains("70000") == true)
        let noHost = HTTP2Server(
            configuration: HTTP2ServerConfiguration(host: "no-such-host.invalid", port: 0),
            handler: testHandler(Probe()))
        let hostError = #expect(throws: HTTP2ServerError.self) { try noHost.start() }
        guard case .invalidAddress(host: "no-such-host.invalid", _) = hostError else {
            Issue.record("expected invalidAddress, got \(String(describing: hostError))")
            return
        }

        let missing = HTTP2ServerConfiguration.TLS(
            certificateChainPath: certificates.directory.path("nope.pem"), privateKeyPath: certificates.keyPath)
        let noCertificate = HTTP2Server(
            configuration: HTTP2ServerConfiguration(tls: missing), handler: testHandler(Probe()))
        let error = #expect(throws: HTTP2ServerError.self) { try noCertificate.start() }
        #expect(error?.description.contains("nope.pem") == true)

        let garbageKey = certificates.directory.path("garbage.key")
        try "not a key".write(toFile: garbageKey, atomically: true, encoding: .utf8)
        let badKey = HTTP2Server(
            configuration: HTTP2ServerConfiguration(
                tls: .init(certificateChainPath: certificates.certificatePath, privateKeyPath: garbageKey)),
            handler: testHandler(Probe()))
        let keyError = #expect(throws: HTTP2ServerError.self) { try badKey.start() }
        guard case .invalidPrivateKey = keyError else {
            Issue.record("expected invalidPrivateKey, got \(String(describing: keyError))")
            return
        }
        let caKey = certificates.directory.path("ca.key")
        let mismatched = HTTP2Server(
            configuration: HTTP2ServerConfiguration(
                tls: .init(certificateChainPath: certificates.certificatePath, privateKeyPath: caKey)),
            handler: testHandler(Probe()))
        let mismatch = #expect(throws: HTTP2ServerError.self) { try mismatched.start() }
        guard case .certificateKeyMismatch = mismatch else {
            Issue.record("expected certificateKeyMismatch, got \(String(describing: mismatch))")
            return
        }
        // 192.0.2.1 (TEST-NET-1) is not an address of this machine: bind fails without any traffic.
        let foreign = HTTP2Server(
            configuration: HTTP2ServerConfiguration(host: "192.0.2.1"), handler: testHandler(Probe()))
        let bindError = #expect(throws: HTTP2ServerError.self) { try foreign.start() }
        #expect(bindError?.description.contains("192.0.2.1") == true)
    }

    @Test("a request value can be built directly and records a GOAWAY request")
    func requestValue() async throws {
        let request = HTTP2Request(
            method: "POST", path: "/goaway", headers: [HTTPField("apns-topic", "com.example")])
        #expect(request.header("APNS-Topic") == "com.example")
        #expect(request.requestedGoAway == nil)
        let response = try await testHandler(Probe())(request)
        #expect(response.status == 200)
        #expect(request.requestedGoAway?.debugData == Data(#"{"reason":"Shutdown"}"#.utf8))
    }

    @Test("an inline handler answers on the event loop")
    func inlineHandler() async throws {
        let server = HTTP2Server(configuration: HTTP2ServerConfiguration()) { request in
            HTTP2Response(status: 201, body: Data("inline \(request.method)".utf8))
        }
        try server.start()
        let result = try await run(
            try tool("h2load"), ["-n", "500", "-c", "2", "-m", "50", "http://127.0.0.1:\(server.port)/"])
        #expect(result.stdout.contains("500 succeeded"), "h2load: \(result.stdout)")
        let curl = try await run(
            try tool("curl"), ["-sS", "--http2-prior-knowledge", "-X", "PUT", "http://127.0.0.1:\(server.port)/"])
        #expect(curl.stdout == "inline PUT")
        await server.shutdown()
    }

    @Test("the event loop's thread carries its name where the kernel shows it (top -H, perf, /proc)")
    func theLoopThreadIsNamedForTheKernel() async throws {
        let server = HTTP2Server(configuration: HTTP2ServerConfiguration()) { _ in
            HTTP2Response(status: 200, body: FileManager.default.contents(atPath: "/proc/thread-self/comm") ?? Data())
        }
        try server.start()
        let curl = try await run(
            try tool("curl"), ["-sS", "--http2-prior-knowledge", "http://127.0.0.1:\(server.port)/"])
        // The handler ran on the loop's thread: its name, "h2server-PORT", is what the kernel reports for it.
        #expect(curl.stdout == "h2server-\(server.port)\n")
        let names = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").map { task in
            let comm = FileManager.default.contents(atPath: "/proc/self/task/\(task)/comm") ?? Data()
            return String(decoding: comm, as: UTF8.self)
        }
        #expect(names.contains("h2server-\(server.port)\n"))
        await server.shutdown()
    }

    @Test("loop hooks run around every round of events, so inline handlers run between them")
    func loopHooksSurroundInlineHandlers() async throws {
        struct Rounds {
            var open = 0
            var started = 0
            var finished = 0
            var handledInside = 0
            var handledOutside = 0
        }
        let rounds = LockedValue(Rounds())
        let hooks = HTTP2LoopHooks(
            willHandleEvents: {
                rounds.withLock {
                    $0.open += 1
                    $0.started += 1
                }
            },
            didHandleEvents: {
                rounds.withLock {
                    $0.open -= 1
                    $0.finished += 1
                }
            })
        let server = HTTP2Server(configuration: HTTP2ServerConfiguration(), loopHooks: hooks) { _ in
            rounds.withLock { $0.open == 1 ? ($0.handledInside += 1) : ($0.handledOutside += 1) }
            return HTTP2Response(status: 200, body: Data("ok".utf8))
        }
        try server.start()
        let result = try await run(
            try tool("h2load"), ["-n", "300", "-c", "2", "-m", "50", "http://127.0.0.1:\(server.port)/"])
        #expect(result.stdout.contains("300 succeeded"), "h2load: \(result.stdout)")
        await server.shutdown()
        let final = rounds.withLock { $0 }
        #expect(final.handledInside == 300)
        #expect(final.handledOutside == 0)
        #expect(final.started == final.finished)
        #expect(final.open == 0)
        #expect(final.started > 0)
    }
}
