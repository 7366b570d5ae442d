import APNsSimulator
import Foundation
import TestSupport
import Testing

/// Injected failures: drop, 429, 503, determinism by seed, GOAWAY and latency.
@Suite("Fault injection")
struct FaultTests {
    @Test func dropAnswers200ButNeverDelivers() async throws {
        let harness = try await SimulatorHarness(faults: FaultConfiguration(dropProbability: 1, seed: 1))
        let token = try await harness.registerDevice()
        let stream = try await harness.openStream(token)
        let result = try await harness.push(to: token)
        let entry = try await harness.logEntry(result.apnsID)
        let metrics = harness.server.gateway.metrics
        stream.stop(signal: SIGKILL)
        await harness.stop()
        #expect(result.status == 200)
        #expect(entry?["outcome"] as? String == "dropped")
        #expect((entry?["events"] as? [[String: Any]])?.first?["detail"] as? String == "fault")
        #expect(metrics.delivered == 0)
        #expect(metrics.dropped == 1)
        #expect(receivedEvents(stream).isEmpty)
    }

    @Test func tooManyRequests() async throws {
        let harness = try await SimulatorHarness(faults: FaultConfiguration(tooManyRequestsProbability: 1, seed: 1))
        let token = try await harness.registerDevice()
        let result = try await harness.push(to: token)
        let entry = try await harness.logEntry(result.apnsID)
        await harness.stop()
        #expect(result.status == 429)
        #expect(result.reason == "TooManyRequests")
        #expect(entry?["outcome"] as? String == "refused")
    }

    @Test func serviceUnavailable() async throws {
        let harness = try await SimulatorHarness(faults: FaultConfiguration(serviceUnavailableProbability: 1, seed: 1))
        let token = try await harness.registerDevice()
        let result = try await harness.push(to: token)
        await harness.stop()
        #expect(result.status == 503)
        #expect(result.reason == "ServiceUnavailable")
        #expect(result.apnsID != nil)
    }

    @Test func faultsAreInvalidRequestsStillGetTheirOwnReason() async throws {
        let harness = try await SimulatorHarness(faults: FaultConfiguration(serviceUnavailableProbability: 1, seed: 1))
        let result = try await harness.push(to: "abc")
        await harness.stop()
        #expect(result.reason == "BadDeviceToken")
    }

    @Test func sameSeedGivesSameFaults() async throws {
        let faults = FaultConfiguration(
            dropProbability: 0.2, tooManyRequestsProbability: 0.3, serviceUnavailableProbability: 0.3, seed: 42)
        var runs: [[String]] = []
        for _ in 0..<2 {
            let harness = try await SimulatorHarness(faults: faults)
            let token = try await harness.registerDevice()
            var outcomes: [String] = []
            for _ in 0..<12 {
                let result = try await harness.push(to: token)
                let outcome = try await harness.logEntry(result.apnsID)?["outcome"] as? String ?? "?"
                outcomes.append("\(result.status)/\(outcome)")
            }
            runs.append(outcomes)
            await harness.stop()
        }
        #expect(runs[0] == runs[1])
        #expect(Set(runs[0]).count >= 3, "12 draws should hit several fault kinds: \(runs[0])")
    }

    static let goAwayScript = #"""
        import json, socket, sys
        import h2.config, h2.connection, h2.events

        port, path, auth, topic = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        statuses, goaway = [], None
        for n in range(3):
            if goaway is not None:
                break
            stream = conn.get_next_available_stream_id()
            conn.send_headers(stream, [(":method", "POST"), (":scheme", "http"), (":authority", "sim"),
                                       (":path", path), ("authorization", auth), ("apns-topic", topic)])
            conn.send_data(stream, b'{"aps":{"badge":1}}', end_stream=True)
            sock.sendall(conn.data_to_send())
            done = False
            while not done:
                data = sock.recv(65536)
                if not data:
                    break
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.ResponseReceived):
                        statuses.append(int(dict(event.headers)[b":status"]))
                    elif isinstance(event, h2.events.StreamEnded) and event.stream_id == stream:
                        done = True
                    elif isinstance(event, h2.events.ConnectionTerminated):
                        goaway = {"afterResponses": len(statuses), "lastStreamId": event.last_stream_id,
                                  "debug": (event.additional_data or b"").decode()}
                sock.sendall(conn.data_to_send())
            if goaway is None:
                sock.settimeout(0.5)
                try:
                    data = sock.recv(65536)
                    for event in conn.receive_data(data):
                        if isinstance(event, h2.events.ConnectionTerminated):
                            goaway = {"afterResponses": len(statuses), "lastStreamId": event.last_stream_id,
                                      "debug": (event.additional_data or b"").decode()}
                except socket.timeout:
                    pass
                sock.settimeout(10)
        print(json.dumps({"statuses": statuses, "goaway": goaway}))
        """#

    @Test func goAwayAfterNStreams() async throws {
        let python = TestEnvironment.python
        guard FileManager.default.isExecutableFile(atPath: python) else {
            Issue.record("Python with h2 is required: set SIGNALFETCH_PYTHON (e.g. /work/venv/bin/python3)")
            return
        }
        let harness = try await SimulatorHarness(faults: FaultConfiguration(goAwayAfterStreams: 2))
        let token = try await harness.registerDevice()
        let script = harness.directory.path("goaway.py")
        try Self.goAwayScript.write(toFile: script, atomically: true, encoding: .utf8)
        let result = try await runTool(
            python,
            [
                script, "\(harness.server.providerPort)", "/3/device/\(token)",
                "bearer \(try harness.providerToken())", SimulatorHarness.topic,
            ])
        await harness.stop()
        let output = try #require(
            try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
            "script output: \(result.stdout) \(result.stderr.suffix(1500))")
        #expect(output["statuses"] as? [Int] == [200, 200])
        let goAway = try #require(output["goaway"] as? [String: Any])
        #expect(goAway["afterResponses"] as? Int == 2)
        #expect(goAway["lastStreamId"] as? Int == 3)
    }

    @Test func latencyDelaysResponses() async throws {
        let harness = try await SimulatorHarness(faults: FaultConfiguration(latency: .milliseconds(400)))
        let token = try await harness.registerDevice()
        let started = ContinuousClock.now
        let result = try await harness.push(to: token)
        let elapsed = ContinuousClock.now - started
        await harness.stop()
        #expect(result.status == 200)
        #expect(elapsed >= .milliseconds(400))
    }
}
