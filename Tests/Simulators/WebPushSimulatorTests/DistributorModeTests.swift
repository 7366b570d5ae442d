import Foundation
import OpenSSLCrypto
import SimulatorSupport
import TestSupport
import Testing
import WebPushSimulator

/// webpush-sim as a UnifiedPush distributor (`--distributor ntfy`): ntfy's answers, its request budget, no `Topic`
/// replacement, and a push port that speaks HTTP/1.1 only.
@Suite struct DistributorGatewayTests {
    private func ntfy() throws -> GatewayHarness {
        try GatewayHarness { $0.distributor = .ntfy }
    }

    private func json(_ response: SimulatorProviderResponse) -> [String: Any]? {
        try? JSONSerialization.jsonObject(with: response.body) as? [String: Any]
    }

    @Test func aPushIsAnsweredWithTheStoredMessageAndDelivered() throws {
        let harness = try ntfy()
        let subscription = try harness.subscribe()
        let sink = harness.connect(subscription)
        let response = try harness.push("signal", to: subscription)
        #expect(response.status == 200)
        #expect(response.header("location") == nil)
        let message = try #require(json(response))
        #expect(message["event"] as? String == "message")
        #expect(message["topic"] as? String == subscription.id)
        #expect((message["id"] as? String)?.count == 12)
        #expect((message["expires"] as? Int ?? 0) - (message["time"] as? Int ?? 0) == 60)
        #expect(sink.plaintexts == ["signal"])
        #expect(harness.lastEntry()?.status == 200)
    }

    @Test func aTopicReplacesNothing() throws {
        let harness = try ntfy()
        let subscription = try harness.subscribe()
        #expect(try harness.push("first", to: subscription, ["topic": "a1"]).status == 200)
        #expect(try harness.push("second", to: subscription, ["topic": "a1"]).status == 200)
        #expect(harness.gateway.subscriptions().first?.stored == 2)
        #expect(harness.connect(subscription).plaintexts == ["first", "second"])
    }

    @Test func refusalsComeInNtfysEnvelope() throws {
        let harness = try ntfy()
        let subscription = try harness.subscribe()
        let tooLarge = harness.push(
            to: subscription, Data(repeating: 1, count: 4097), headers: try harness.headers())
        #expect(tooLarge.status == 413)
        #expect(json(tooLarge)?["code"] as? Int == 41301)
        #expect(json(tooLarge)?["http"] as? Int == 413)
        #expect(harness.gateway.unsubscribe(subscription.id))
        let gone = try harness.push("late", to: subscription)
        #expect(gone.status == 404, "ntfy has no 410: an unsubscribed topic is not found")
        #expect(json(gone)?["code"] as? Int == 40401)
    }

    @Test func eachTopicHasABurstOfSixtyThenOneEveryFiveSeconds() throws {
        let harness = try ntfy()
        let subscription = try harness.subscribe()
        let other = try harness.subscribe()
        for _ in 0..<60 { #expect(try harness.push("x", to: subscription).status == 200) }
        let limited = try harness.push("x", to: subscription)
        #expect(limited.status == 429)
        #expect(json(limited)?["code"] as? Int == 42901)
        #expect(try harness.push("x", to: other).status == 200, "the budget is per topic")
        harness.clock.advance(by: 5)
        #expect(try harness.push("x", to: subscription).status == 200)
        #expect(try harness.push("x", to: subscription).status == 429)
    }
}

/// The webpush-sim binary in distributor mode against pywebpush (requests, HTTP/1.1) and curl.
@Suite(.serialized) struct DistributorModeTests {
    @Test func pywebpushIsAnsweredAsNtfyAnswers() async throws {
        let simulator = try await RunningWebPushSimulator.start(extraArguments: ["--distributor", "ntfy"])
        let key = try P256PrivateKey()
        let (id, subscription) = try await simulator.subscribe(
            applicationServerKey: Base64URL.encode(try key.publicKey.rawRepresentation))
        let stream = try await simulator.openStream(id)
        defer { stream.stop(signal: SIGKILL) }
        let plan: [String: Any] = [
            "vapidKeyFile": try simulator.writeKey(key),
            "sends": [
                [
                    "case": "ok", "subscription": subscription, "data": #"{"acct":"canary-17","st":"t1"}"#,
                    "headers": ["Urgency": "low", "Topic": "acct-a1"],
                ],
                ["case": "tooLarge", "subscription": subscription, "data": String(repeating: "y", count: 5000)],
            ],
        ]
        let results = try await simulator.runPeer("webpush_pywebpush.py", plan: plan)
        #expect(results["ok"]?["status"] as? Int == 200)
        #expect((results["ok"]?["body"] as? String)?.contains(#""event":"message""#) == true)
        #expect(results["tooLarge"]?["status"] as? Int == 413)
        #expect((results["tooLarge"]?["body"] as? String)?.contains(#""code":41301"#) == true)
        let events = await waitForMessages(stream, count: 1)
        #expect(events.first?["plaintext"] as? String == #"{"acct":"canary-17","st":"t1"}"#)
        #expect(events.first?["urgency"] as? String == "low")
        #expect(events.first?["topic"] is NSNull, "a distributor replaces nothing by Topic")
        let log = try await simulator.logEntries()
        #expect(log.map { $0["status"] as? Int } == [200, 413])
        #expect(log.allSatisfy { $0["httpVersion"] as? String == "HTTP/1.1" })
        let text = String(decoding: try JSONSerialization.data(withJSONObject: log), as: UTF8.self)
        #expect(!text.contains("canary-17"))
    }

    /// A client offering h2 and HTTP/1.1 gets HTTP/1.1; one offering only h2 gets no ALPN answer (as from a server
    /// without HTTP/2), so it cannot speak HTTP/2 there.
    @Test func thePushPortSpeaksHTTP1Only() async throws {
        let simulator = try await RunningWebPushSimulator.start(extraArguments: ["--distributor", "ntfy"])
        for options in [["--http2"], ["--http1.1"], ["--no-alpn"]] {
            let result = try await runTool(
                simulator.curl,
                ["-sS"] + options + [
                    "--cacert", simulator.caPath, "-o", "/dev/null", "-w", "%{http_code} %{http_version}",
                    "-H", "TTL: 60", "-d", "x", "\(simulator.providerURL)/wpush/unknown",
                ])
            #expect(result.stdout == "404 1.1", "\(options): \(result.stdout) \(result.stderr)")
        }
        let openssl = try requireTool("openssl")
        let h2Only = try await runTool(
            openssl,
            ["s_client", "-connect", "127.0.0.1:\(simulator.providerPort)", "-alpn", "h2", "-CAfile", simulator.caPath])
        #expect(h2Only.stdout.contains("No ALPN negotiated"), "\(h2Only.stdout.suffix(400))")
    }

    @Test func anUnknownDistributorIsAUsageError() async throws {
        let executable = TestEnvironment.executable("webpush-sim").path
        let unknown = try await runTool(executable, ["--h2c", "--distributor", "nextpush"])
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("--distributor must be one of: ntfy"))
        let cleartext = try await runTool(executable, ["--h2c", "--distributor", "ntfy"])
        #expect(cleartext.status == 2)
        #expect(cleartext.stderr.contains("--distributor needs TLS"))
    }
}
