import APNsSimulator
import Foundation
import TestSupport
import Testing

/// Injected failures: drop, 429, 503, determinism by seed, GOAWAY and latency.
@Suite("Fault injection")
struct FaultTests {
    @Test func dropAnswers200ButNeverDelivers() async throws {
        let harness = try await SimulatorHarness(faults: APNsFaults(SimulatorFaults(dropProbability: 1, seed: 1)))
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
        let harness = try await SimulatorHarness(faults: APNsFaults(SimulatorFaults(status429Probability: 1, seed: 1)))
        let token = try await harness.registerDevice()
        let result = try await harness.push(to: token)
        let entry = try await harness.logEntry(result.apnsID)
        await harness.stop()
        #expect(result.status == 429)
        #expect(result.reason == "TooManyRequests")
        #expect(entry?["outcome"] as? String == "refused")
    }

    @Test func serviceUnavailable() async throws {
        let harness = try await SimulatorHarness(faults: APNsFaults(SimulatorFaults(status503Probability: 1, seed: 1)))
        let token = try await harness.registerDevice()
        let result = try await harness.push(to: token)
        await harness.stop()
        #expect(result.status == 503)
        #expect(result.reason == "ServiceUnavailable")
        #expect(result.apnsID != nil)
    }

    @Test func faultsAreInvalidRequestsStillGetTheirOwnReason() async throws {
        let harness = try await SimulatorHarness(faults: APNsFaults(SimulatorFaults(status503Probability: 1, seed: 1)))
        let result = try await harness.push(to: "abc")
        await harness.stop()
        #expect(result.reason == "BadDeviceToken")
    }

    @Test func sameSeedGivesSameFaults() async throws {
        let faults = APNsFaults(
            SimulatorFaults(dropProbability: 0.2, status429Probability: 0.3, status503Probability: 0.3, seed: 42))
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

    @Test func goAwayAfterNStreams() async throws {
        let python = TestEnvironment.python
        guard FileManager.default.isExecutableFile(atPath: python) else {
            Issue.record("Python with h2 is required: set SIGNALFETCH_PYTHON (e.g. /work/venv/bin/python3)")
            return
        }
        let harness = try await SimulatorHarness(faults: APNsFaults(goAwayAfterStreams: 2))
        let token = try await harness.registerDevice()
        let script = TestEnvironment.peer("h2_goaway.py")
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
        let harness = try await SimulatorHarness(faults: APNsFaults(SimulatorFaults(latency: .milliseconds(400))))
        let token = try await harness.registerDevice()
        let started = ContinuousClock.now
        let result = try await harness.push(to: token)
        let elapsed = ContinuousClock.now - started
        await harness.stop()
        #expect(result.status == 200)
        #expect(elapsed >= .milliseconds(400))
    }
}
