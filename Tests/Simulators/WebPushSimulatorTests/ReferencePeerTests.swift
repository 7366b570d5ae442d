import Foundation
import OpenSSLCrypto
import TestSupport
import Testing
import WebPushSimulator

/// The webpush-sim binary against real peers: pywebpush (a reference sender) and a Mozilla-protocol browser
/// on websocket-client that decrypts with its own keys (http_ece).
@Suite(.serialized) struct ReferencePeerTests {
    @Test func pywebpushIsAcceptedAndTheStreamHoldsThePlaintext() async throws {
        let simulator = try await RunningWebPushSimulator.start()
        let key = try P256PrivateKey()
        let (id, subscription) = try await simulator.subscribe(
            applicationServerKey: Base64URL.encode(try key.publicKey.rawRepresentation))
        let stream = try await simulator.openStream(id)
        defer { stream.stop(signal: SIGKILL) }
        let stranger = try P256PrivateKey()
        let plan: [String: Any] = [
            "vapidKeyFile": try simulator.writeKey(key),
            "sends": [
                [
                    "case": "ok", "subscription": subscription, "data": #"{"acct":"canary-91","st":"t1"}"#, "ttl": 90,
                    "headers": ["Urgency": "high", "Topic": "acct-a1"],
                ],
                ["case": "badSignature", "subscription": subscription, "data": "x", "tamper": "signature"],
            ],
        ]
        let results = try await simulator.runPeer("webpush_pywebpush.py", plan: plan)
        var strangerPlan = plan
        strangerPlan["vapidKeyFile"] = try simulator.writeKey(stranger)
        strangerPlan["sends"] = [["case": "otherKey", "subscription": subscription, "data": "x"]]
        let strangerResults = try await simulator.runPeer("webpush_pywebpush.py", plan: strangerPlan)
        #expect(results["ok"]?["status"] as? Int == 201)
        #expect((results["ok"]?["location"] as? String)?.hasPrefix(simulator.providerURL + "/m/") == true)
        #expect(results["ok"]?["ttl"] as? String == "90")
        #expect(results["badSignature"]?["status"] as? Int == 401)
        #expect(strangerResults["otherKey"]?["status"] as? Int == 403)
        let events = await waitForMessages(stream, count: 1)
        #expect(events.count == 1)
        #expect(events.first?["plaintext"] as? String == #"{"acct":"canary-91","st":"t1"}"#)
        #expect(events.first?["urgency"] as? String == "high")
        #expect(events.first?["topic"] as? String == "acct-a1")
        #expect(events.first?["ttl"] as? Int == 90)
        let log = try await simulator.logEntries()
        #expect(log.map { $0["status"] as? Int } == [201, 401, 403])
        #expect(log.allSatisfy { $0["httpVersion"] as? String == "HTTP/1.1" })
        let text = String(decoding: try JSONSerialization.data(withJSONObject: log), as: UTF8.self)
        #expect(!text.contains("canary-91"))
        #expect((log.first?["vapid"] as? [String: Any])?["sub"] as? String == "mailto:ops@example.com")
    }

    @Test func aMozillaProtocolBrowserGetsDecryptsAcksAndUnregisters() async throws {
        let simulator = try await RunningWebPushSimulator.start()
        let key = try P256PrivateKey()
        let results = try await simulator.runPeer(
            "webpush_mozilla.py",
            plan: [
                "url": "ws://127.0.0.1:\(simulator.mozillaPort)/", "vapidKeyFile": try simulator.writeKey(key),
                "applicationServerKey": Base64URL.encode(try key.publicKey.rawRepresentation),
            ])
        #expect(results["hello"]?["status"] as? Int == 200)
        #expect(results["hello"]?["use_webpush"] as? Bool == true)
        #expect((results["hello"]?["uaid"] as? String)?.count == 32)
        #expect(results["register"]?["status"] as? Int == 200)
        #expect((results["register"]?["endpoint"] as? String)?.hasPrefix(simulator.providerURL + "/wpush/") == true)
        #expect(results["notification"]?["pushStatus"] as? Int == 201)
        #expect(results["notification"]?["plaintext"] as? String == "first signal")
        #expect(results["notification"]?["headers"] as? [String: String] == ["encoding": "aes128gcm"])
        #expect(results["ping"]?["answer"] as? [String: String] == [:])
        #expect(results["redelivered"]?["uaid"] as? String == results["hello"]?["uaid"] as? String)
        #expect(results["redelivered"]?["sameVersion"] as? Bool == true)
        #expect(results["redelivered"]?["plaintext"] as? String == "unacked signal")
        #expect(results["unregister"]?["status"] as? Int == 200)
        #expect(results["unregister"]?["pushStatus"] as? Int == 410)
        let outcomes = try await simulator.logEntries().map { $0["outcome"] as? String }
        #expect(outcomes == ["acknowledged", "acknowledged", "refused"])
    }

    /// What mailboxd does: an RFC 8291 body and a VAPID token made here, pushed over HTTP/2 by curl.
    @Test func aPushOverHTTP2IsDecryptedAndLoggedAsHTTP2() async throws {
        let simulator = try await RunningWebPushSimulator.start()
        let server = try ApplicationServer()
        let (id, subscription) = try await simulator.subscribe(applicationServerKey: server.publicKeyText)
        let stream = try await simulator.openStream(id)
        defer { stream.stop(signal: SIGKILL) }
        let endpoint = try #require(subscription["endpoint"] as? String)
        let keys = try #require(subscription["keys"] as? [String: String])
        let created = WebPushCreatedSubscription(
            id: id, endpoint: endpoint, p256dh: keys["p256dh"] ?? "", auth: keys["auth"] ?? "")
        let harness = try GatewayHarness()
        let body = try harness.encrypt(#"{"acct":"a9","st":"AAAAAAAAAAAAAAAA"}"#, for: created, bodyLength: 256)
        let bodyPath = simulator.directory.path("body.bin")
        try body.write(to: URL(fileURLWithPath: bodyPath))
        let authorization = try server.authorization(audience: simulator.providerURL, now: Date())
        let result = try await runTool(
            simulator.curl,
            [
                "-sS", "--http2", "--cacert", simulator.caPath, "-o", "/dev/null", "-w", "%{http_code} %{http_version}",
                "-H", "TTL: 3600", "-H", "Urgency: normal", "-H", "Topic: a9", "-H", "Content-Encoding: aes128gcm",
                "-H", "Authorization: \(authorization)", "--data-binary", "@\(bodyPath)", endpoint,
            ])
        #expect(result.stdout == "201 2", "\(result.stderr)")
        let events = await waitForMessages(stream, count: 1)
        #expect(events.first?["plaintext"] as? String == #"{"acct":"a9","st":"AAAAAAAAAAAAAAAA"}"#)
        #expect(events.first?["bodyBytes"] as? Int == 256)
        let entry = try #require(try await simulator.logEntries().first)
        #expect(entry["httpVersion"] as? String == "HTTP/2")
        #expect(entry["outcome"] as? String == "delivered")
    }

    /// `--endpoint-base` names the endpoints and the only VAPID `aud`; `--fault-503` refuses valid pushes until
    /// `PUT /sim/faults` lifts it.
    @Test func theEndpointBaseAndFaultFlagsTakeEffect() async throws {
        let simulator = try await RunningWebPushSimulator.start(
            extraArguments: ["--endpoint-base", "https://localhost:2201", "--fault-503", "1", "--fault-seed", "5"])
        let server = try ApplicationServer()
        let (id, subscription) = try await simulator.subscribe(applicationServerKey: server.publicKeyText)
        let endpoint = try #require(subscription["endpoint"] as? String)
        #expect(endpoint == "https://localhost:2201/wpush/\(id)")
        let keys = try #require(subscription["keys"] as? [String: String])
        let created = WebPushCreatedSubscription(
            id: id, endpoint: endpoint, p256dh: keys["p256dh"] ?? "", auth: keys["auth"] ?? "")
        let bodyPath = simulator.directory.path("body.bin")
        try GatewayHarness().encrypt("x", for: created).write(to: URL(fileURLWithPath: bodyPath))
        func push(audience: String) async throws -> String {
            let authorization = try server.authorization(audience: audience, now: Date())
            return try await runTool(
                simulator.curl,
                [
                    "-sS", "--cacert", simulator.caPath, "--connect-to",
                    "localhost:2201:127.0.0.1:\(simulator.providerPort)",
                    "-o", "/dev/null", "-w", "%{http_code}", "-H", "TTL: 60", "-H", "Content-Encoding: aes128gcm",
                    "-H", "Authorization: \(authorization)", "--data-binary", "@\(bodyPath)", endpoint,
                ]
            ).stdout
        }
        #expect(try await push(audience: "https://localhost:2201") == "503")
        #expect(try await push(audience: simulator.providerURL) == "401")
        #expect(try await simulator.device("PUT", "/sim/faults", "{}").0 == 200)
        #expect(try await push(audience: "https://localhost:2201") == "201")
        let log = try await simulator.logEntries()
        #expect(log.map { $0["status"] as? Int } == [503, 401, 201])
        #expect((log.first?["events"] as? [[String: Any]])?.first?["detail"] as? String == "fault")
    }

    /// One push port, both protocols: curl over HTTP/2 (ALPN h2), over HTTP/1.1 (ALPN http/1.1), and with no ALPN
    /// at all (as aiohttp connects), which a web server answers in HTTP/1.1.
    @Test func thePushPortSpeaksHTTP2AndHTTP1() async throws {
        let simulator = try await RunningWebPushSimulator.start()
        for (options, expected) in [(["--http2"], "404 2"), (["--http1.1"], "404 1.1"), (["--no-alpn"], "404 1.1")] {
            let result = try await runTool(
                simulator.curl,
                ["-sS"] + options + [
                    "--cacert", simulator.caPath, "-w", "\n%{http_code} %{http_version}",
                    "-H", "TTL: 60", "-d", "x", "\(simulator.providerURL)/wpush/unknown",
                ])
            let lines = result.stdout.split(separator: "\n")
            #expect(lines.first?.contains("\"errno\":102") == true, "\(result.stdout) \(result.stderr)")
            #expect(lines.last.map(String.init) == expected, "\(options): \(result.stdout) \(result.stderr)")
        }
    }

    @Test func startupMistakesExitWithUsage() async throws {
        let executable = TestEnvironment.executable("webpush-sim").path
        let missingTLS = try await runTool(executable, ["--listen", "127.0.0.1:0"])
        #expect(missingTLS.status == 2, "\(missingTLS.stderr)")
        #expect(missingTLS.stderr.contains("--tls-cert"))
        let badBase = try await runTool(executable, ["--h2c", "--endpoint-base", "ftp://x"])
        #expect(badBase.status == 2)
        #expect(badBase.stderr.contains("--endpoint-base"))
        let unknown = try await runTool(executable, ["--h2c", "--nope", "1"])
        #expect(unknown.status == 2)
        let overOne = try await runTool(executable, ["--h2c", "--fault-429", "0.6", "--fault-503", "0.6"])
        #expect(overOne.status == 2)
        #expect(overOne.stderr.contains("add up to at most 1"))
        let help = try await runTool(executable, ["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("--mozilla-listen"))
    }
}
