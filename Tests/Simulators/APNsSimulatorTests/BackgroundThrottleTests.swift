import APNsSimulator
import Foundation
import TestSupport
import Testing

/// The per-device background budget: pushes over it are held back, coalesced and released later.
@Suite("Background throttling")
struct BackgroundThrottleTests {
    private let backgroundHeaders = [
        ("apns-topic", SimulatorHarness.topic), ("apns-push-type", "background"), ("apns-priority", "5"),
    ]

    private func outcomes(_ harness: SimulatorHarness, _ results: [PushResult]) async throws -> [String?] {
        var outcomes: [String?] = []
        for result in results { outcomes.append(try await harness.logEntry(result.apnsID)?["outcome"] as? String) }
        return outcomes
    }

    @Test func pushesOverTheBudgetAreDelayedAndCoalesced() async throws {
        let harness = try await SimulatorHarness(backgroundBudget: 2, backgroundWindow: 3600)
        let token = try await harness.registerDevice()
        let stream = try await harness.openStream(token)
        var results: [PushResult] = []
        for state in 1...4 {
            results.append(
                try await harness.push(
                    to: token, headers: backgroundHeaders, body: #"{"aps":{"content-available":1},"st":"\#(state)"}"#))
        }
        let withinBudget = await waitForEvents(stream, count: 2)
        // Alert pushes are not limited by the background budget.
        let alert = try await harness.push(to: token, body: #"{"aps":{"badge":5}}"#)
        let withAlert = await waitForEvents(stream, count: 3)
        let held = try await outcomes(harness, results)

        harness.clock.advance(by: 3601)
        let released = await waitForEvents(stream, count: 4)
        stream.stop(signal: SIGKILL)
        let finalEntry = try await harness.logEntry(results[3].apnsID)
        let metrics = harness.server.gateway.metrics
        await harness.stop()

        #expect(results.allSatisfy { $0.status == 200 })
        #expect(withinBudget.prefix(2).map { $0["apnsId"] as? String } == [results[0].apnsID, results[1].apnsID])
        #expect(withAlert.count == 3)
        #expect(withAlert.last?["apnsId"] as? String == alert.apnsID)
        #expect(held == ["delivered", "delivered", "coalesced", "throttled"])
        #expect(released.count == 4)
        #expect(released.last?["apnsId"] as? String == results[3].apnsID)
        #expect((released.last?["payload"] as? [String: Any])?["st"] as? String == "4")
        let history = (finalEntry?["events"] as? [[String: Any]])?.compactMap { $0["outcome"] as? String }
        #expect(history == ["throttled", "delivered"])
        #expect(metrics.throttled == 2)
        #expect(metrics.coalesced == 1)
    }

    @Test func budgetZeroDisablesThrottling() async throws {
        let harness = try await SimulatorHarness(backgroundBudget: 0)
        let token = try await harness.registerDevice()
        let stream = try await harness.openStream(token)
        for _ in 1...5 {
            _ = try await harness.push(to: token, headers: backgroundHeaders, body: #"{"aps":{"content-available":1}}"#)
        }
        let events = await waitForEvents(stream, count: 5)
        stream.stop(signal: SIGKILL)
        await harness.stop()
        #expect(events.count == 5)
    }
}
