import Durations
import Foundation
import MailboxStore
import Push
import TestSupport
import Testing

@Suite struct OutboxTests {
    func registerDevice(_ f: StoreFixture, _ account: Account, _ n: Int) async throws {
        try await f.store.registerDevice(
            address: .apns(StoreFixture.token(n), topic: "com.example.mail", environment: .sandbox),
            accountID: account.id,
            sessionID: nil)
    }

    func registerTwoDevices(_ f: StoreFixture, _ account: Account) async throws {
        for n in 1...2 { try await registerDevice(f, account, n) }
    }

    @Test(arguments: StoreEngineKind.allCases) func aHundredDeliveriesLeaveOneRowPerDevice(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        try await registerTwoDevices(f, alice)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<100 { group.addTask { _ = try await f.deliver(to: "alice", subject: "burst \(i)") } }
            try await group.waitForAll()
        }
        #expect(try await f.store.outboxStats().depth == 2)
        let claimed = try await f.store.claimDueSignals()
        #expect(claimed.count == 2)
        #expect(claimed.allSatisfy { $0.modseq == 100 && $0.state.modseq == 100 && $0.unread == 100 })
        // Group commit: far fewer transactions than deliveries.
        if engine == .sqlite { #expect(f.store.committedWriteBatches < 100) }
    }

    @Test(arguments: StoreEngineKind.allCases) func releasingLeasesFreesClaimedRowsButKeepsRetryTimes(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        try await registerTwoDevices(f, alice)
        let claimed = try await f.store.claimDueSignals()
        #expect(claimed.count == 2)
        // One row goes into retry backoff; the other stays claimed, as if its sender died mid-send.
        try await f.store.rescheduleSignal(claimed[0], after: 60, error: "transport")
        #expect(try await f.store.claimDueSignals().isEmpty, "one row is leased, the other waits for its retry")
        try await f.store.releaseSignalLeases()
        let reclaimed = try await f.store.claimDueSignals()
        #expect(reclaimed.map(\.deviceID) == [claimed[1].deviceID])
        for item in reclaimed { try await f.store.completeSignal(item, sentModseq: item.modseq) }
        #expect(try await f.store.claimDueSignals().isEmpty, "the retry time survived the release")
        f.advance(61)
        #expect(try await f.store.claimDueSignals().map(\.deviceID) == [claimed[0].deviceID])
    }

    @Test(arguments: StoreEngineKind.allCases) func claimLeasesRowsAndCompletionRespectsNewerChanges(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        try await registerTwoDevices(f, alice)
        // Registration queued a signal with the current state for each device.
        var claimed = try await f.store.claimDueSignals()
        #expect(claimed.count == 2)
        #expect(try await f.store.claimDueSignals().isEmpty, "claimed rows are leased")
        for item in claimed { try await f.store.completeSignal(item, sentModseq: item.modseq) }
        #expect(try await f.store.outboxStats().depth == 0)

        // A change while the signal is in flight: the row stays, and goes at once (a token is left).
        _ = try await f.deliver(to: "alice")
        claimed = try await f.store.claimDueSignals()
        #expect(claimed.count == 2)
        _ = try await f.deliver(to: "alice")
        for item in claimed { try await f.store.completeSignal(item, sentModseq: item.modseq) }
        #expect(try await f.store.outboxStats().depth == 2)
        claimed = try await f.store.claimDueSignals()
        #expect(claimed.map(\.modseq) == [2, 2])
        for item in claimed { try await f.store.completeSignal(item, sentModseq: item.modseq) }
        #expect(try await f.store.lastSignalledModseqs(accountID: alice.id).values.allSatisfy { $0 == 2 })
    }

    /// Signal, claim, send, repeat, with the clock still: how many signals go out for `changes` changes.
    func signalRun(_ f: StoreFixture, changes: Int) async throws -> Int {
        var sent = 0
        for _ in 0..<changes {
            _ = try await f.deliver(to: "alice")
            for item in try await f.store.claimDueSignals() {
                try await f.store.completeSignal(item, sentModseq: item.modseq)
                sent += 1
            }
        }
        return sent
    }

    @Test(arguments: StoreEngineKind.allCases) func aQuietDeviceIsSignalledAtOnceAndABusyOneAtTheRefillRate(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine, pacing: SignalPacing(burst: 3, refillPerSecond: 2))
        let alice = try await f.account("alice")
        try await registerDevice(f, alice, 1)
        // The registration signal and two changes spend the burst of three, back to back, with no wait.
        for item in try await f.store.claimDueSignals() {
            try await f.store.completeSignal(item, sentModseq: item.modseq)
        }
        #expect(try await signalRun(f, changes: 2) == 2)
        // The bucket is empty: ten more changes wait in the one row, due when a token returns (in half a second).
        #expect(try await signalRun(f, changes: 10) == 0)
        #expect(try await f.store.outboxStats().depth == 1)
        #expect(try await f.store.nextSignalDue() == f.clock.secondsSince1970 + 0.5)
        f.advance(0.5)
        let released = try await f.store.claimDueSignals()
        #expect(released.count == 1)
        #expect(released.first?.modseq == 12, "the newest state goes out")
        for item in released { try await f.store.completeSignal(item, sentModseq: item.modseq) }
        // Ten quiet seconds refill the bucket, but only to the burst: three of five changes go at once.
        f.advance(10)
        #expect(try await signalRun(f, changes: 5) == 3)
    }

    @Test(arguments: StoreEngineKind.allCases) func pacingStateSurvivesARestart(engine: StoreEngineKind) async throws {
        let pacing = SignalPacing(burst: 1, refillPerSecond: 0.1)
        let first = try StoreFixture(engine: engine, pacing: pacing)
        let alice = try await first.account("alice")
        try await registerDevice(first, alice, 1)
        for item in try await first.store.claimDueSignals() {
            try await first.store.completeSignal(item, sentModseq: item.modseq)
        }
        // The reopened store knows the token was spent: the next change waits for the refill.
        let f = try StoreFixture(pacing: pacing, reopening: first)
        _ = try await f.deliver(to: "alice")
        #expect(try await f.store.claimDueSignals().isEmpty)
        #expect(try await f.store.outboxStats().depth == 1)
    }

    @Test(arguments: StoreEngineKind.allCases) func rescheduleBacksOffAndRecordsTheError(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        try await registerTwoDevices(f, alice)
        let claimed = try await f.store.claimDueSignals()
        for item in claimed { try await f.store.rescheduleSignal(item, after: 5, error: "ServiceUnavailable") }
        #expect(try await f.store.outboxStats() == OutboxStats(depth: 2, retrying: 2))
        f.advance(4)
        #expect(try await f.store.claimDueSignals().isEmpty)
        let next = try #require(try await f.store.nextSignalDue())
        #expect(next > f.clock.secondsSince1970)
        f.advance(2)
        let retried = try await f.store.claimDueSignals()
        #expect(retried.map(\.attempts) == [1, 1])
        try await f.store.dropSignal(retried[0])
        #expect(try await f.store.outboxStats().depth == 1)
    }

    @Test(arguments: StoreEngineKind.allCases) func readingOnOneDeviceSignalsTheOthersWithTheNewBadge(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        try await registerTwoDevices(f, alice)
        let id = try await f.deliver(to: "alice").id
        for item in try await f.store.claimDueSignals() {
            #expect(item.unread == 1)
            try await f.store.completeSignal(item, sentModseq: item.modseq)
        }
        f.advance(1)
        try await f.store.updateMessage(id: id, accountID: alice.id, seen: true)
        let claimed = try await f.store.claimDueSignals()
        #expect(claimed.count == 2)
        #expect(claimed.allSatisfy { $0.unread == 0 })
    }
}
