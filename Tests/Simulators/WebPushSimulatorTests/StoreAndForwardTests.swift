import Foundation
import SimulatorSupport
import Testing
import WebPushSimulator

/// RFC 8030's store-and-forward through the gateway with a manual clock: TTL, `TTL: 0`, `Topic` replacement.
@Suite struct StoreAndForwardTests {
    @Test func aSubscriptionWithoutAListenerKeepsMessagesUntilTheirTTL() throws {
        let harness = try GatewayHarness()
        let subscription = try harness.subscribe()
        #expect(try harness.push("short", to: subscription, ["ttl": "30"]).status == 201)
        #expect(try harness.push("long", to: subscription, ["ttl": "120"]).status == 201)
        #expect(harness.gateway.subscriptions().first?.stored == 2)
        harness.clock.advance(by: 60)
        harness.gateway.processDueWork()
        #expect(harness.gateway.subscriptions().first?.stored == 1)
        let sink = harness.connect(subscription)
        #expect(sink.plaintexts == ["long"])
        let outcomes = harness.gateway.logEntries().map(\.outcome)
        #expect(outcomes == [.expired, .delivered])
        #expect(harness.gateway.metrics.expired == 1)
    }

    @Test func offlineKeepsMessagesEvenWithAListenerAndDeliversOnReturn() throws {
        let harness = try GatewayHarness()
        let subscription = try harness.subscribe()
        let sink = harness.connect(subscription)
        #expect(harness.gateway.setOnline(false, for: subscription.id))
        #expect(try harness.push("one", to: subscription).status == 201)
        #expect(try harness.push("two", to: subscription).status == 201)
        #expect(sink.received.isEmpty)
        #expect(harness.gateway.logEntries().first?.events.last?.detail == "offline")
        harness.clock.advance(by: 10)
        #expect(harness.gateway.setOnline(true, for: subscription.id))
        #expect(sink.plaintexts == ["one", "two"])
        #expect(harness.gateway.subscriptions().first?.delivered == 2)
    }

    @Test func ttlZeroIsDeliveredOnlyAtOnce() throws {
        let harness = try GatewayHarness()
        let subscription = try harness.subscribe()
        #expect(try harness.push("now or never", to: subscription, ["ttl": "0"]).status == 201)
        #expect(harness.lastEntry()?.outcome == .dropped)
        #expect(harness.lastEntry()?.events.last?.detail == "TTL 0 while unreachable")
        let sink = harness.connect(subscription)
        #expect(sink.received.isEmpty)
        #expect(try harness.push("at once", to: subscription, ["ttl": "0"]).status == 201)
        #expect(sink.plaintexts == ["at once"])
    }

    @Test func aKeptMessageIsReplacedByANewerOneWithItsTopic() throws {
        let harness = try GatewayHarness()
        let subscription = try harness.subscribe()
        #expect(try harness.push("a1 old", to: subscription, ["topic": "a1"]).status == 201)
        #expect(try harness.push("b", to: subscription, ["topic": "b"]).status == 201)
        #expect(try harness.push("plain", to: subscription).status == 201)
        #expect(try harness.push("a1 new", to: subscription, ["topic": "a1"]).status == 201)
        #expect(harness.gateway.subscriptions().first?.stored == 3)
        let sink = harness.connect(subscription)
        #expect(sink.plaintexts == ["b", "plain", "a1 new"])
        let first = try #require(harness.gateway.logEntries().first)
        #expect(first.outcome == .replaced)
        #expect(first.events.last?.detail == "replaced by \(harness.gateway.logEntries().last?.messageId ?? "")")
        #expect(harness.gateway.metrics.replaced == 1)
    }

    @Test func deletingDropsWhatWasKept() throws {
        let harness = try GatewayHarness()
        let subscription = try harness.subscribe()
        #expect(try harness.push("kept", to: subscription).status == 201)
        #expect(harness.gateway.unsubscribe(subscription.id))
        #expect(harness.lastEntry()?.outcome == .dropped)
        #expect(harness.lastEntry()?.events.last?.detail == "subscription deleted")
        #expect(!harness.gateway.unsubscribe(subscription.id))
        #expect(harness.gateway.status(of: subscription.id) == .deleted)
        #expect(harness.gateway.subscriptions().isEmpty)
    }
}

/// Faults and scripted answers.
@Suite struct FaultTests {
    @Test func seededFaultsReplayAndDropsAreAcceptedButNotDelivered() throws {
        let harness = try GatewayHarness()
        let subscription = try harness.subscribe()
        let sink = harness.connect(subscription)
        let faults = SimulatorFaults(
            dropProbability: 0.2, status429Probability: 0.2, status503Probability: 0.2, seed: 42)
        func run() throws -> [Int] {
            harness.gateway.setFaults(faults)
            return try (0..<30).map { _ in try harness.push("x", to: subscription).status }
        }
        let first = try run()
        let second = try run()
        #expect(first == second)
        #expect(Set(first) == [201, 429, 503])
        let dropped = harness.gateway.logEntries().filter { $0.outcome == .dropped }
        #expect(!dropped.isEmpty)
        #expect(dropped.allSatisfy { $0.status == 201 && $0.events.last?.detail == "fault" })
        #expect(sink.received.count == first.filter { $0 == 201 }.count * 2 - dropped.count)
        let unavailable = harness.gateway.logEntries().first { $0.status == 503 }
        #expect(unavailable?.events.last?.detail == "fault")
    }

    @Test func aScriptedAnswerIsGivenCountTimes() throws {
        let harness = try GatewayHarness()
        let subscription = try harness.subscribe()
        #expect(
            harness.gateway.scriptError(
                WebPushScriptedError(status: 429, count: 2, retryAfter: 7), for: subscription.id))
        let first = try harness.push("x", to: subscription)
        #expect(first.status == 429)
        #expect(first.header("retry-after") == "7")
        #expect(try harness.push("x", to: subscription).status == 429)
        #expect(try harness.push("x", to: subscription).status == 201)
        #expect(harness.gateway.scriptError(WebPushScriptedError(status: 410), for: subscription.id))
        for _ in 0..<3 { #expect(try harness.push("x", to: subscription).status == 410) }
        #expect(harness.gateway.clearScriptedError(for: subscription.id))
        #expect(try harness.push("x", to: subscription).status == 201)
        #expect(harness.gateway.logEntries().filter { $0.events.last?.detail == "scripted" }.count == 5)
        // The credentials are checked before a scripted answer.
        #expect(harness.gateway.scriptError(WebPushScriptedError(status: 503), for: subscription.id))
        #expect(try harness.push("x", to: subscription, ["authorization": nil]).status == 401)
    }
}
