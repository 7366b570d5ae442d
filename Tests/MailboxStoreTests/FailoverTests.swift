import Foundation
import Locking
import PostgresKit
import Push
import TestSupport
import Testing

@testable import MailboxStore

/// Stores on a real two-node PostgreSQL cluster run by pg_auto_failover (`Scripts/postgres-cluster`), reached through
/// the multi-host URL: each store stands for one mailboxd instance.
@Suite(.serialized) struct FailoverTests {
    /// Counts the wake-ups a store's signal watch gives.
    final class Wakes: Sendable {
        private let count = LockedValue(0)
        func add() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }

        /// Waits up to `seconds` for the count to pass `than`.
        func waitBeyond(_ than: Int, seconds: Double) async throws -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if value > than { return true }
                try await Task.sleep(for: .milliseconds(20))
            }
            return value > than
        }
    }

    /// Tries `body` until it succeeds; every failure on the way must be the store's "unavailable" (a 503), never
    /// another error (a 500). Returns the result and the seconds it took.
    func untilAvailable<T>(
        within seconds: Double, _ body: () async throws -> T
    ) async throws -> (T, Double) {
        let start = Date()
        while true {
            do {
                return (try await body(), Date().timeIntervalSince(start))
            } catch MailboxStoreError.storage(let failure) where failure.isUnavailable {
                guard Date().timeIntervalSince(start) < seconds else { throw MailboxStoreError.storage(failure) }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    @Test func anAcknowledgedWriteSurvivesThePrimarysLossAndListenFollowsTheNewPrimary() async throws {
        let cluster = try PostgresCluster()
        #expect(try cluster.status().synchronous, "the standby is synchronous before the failover")
        let database = try StoreDatabase(parsing: cluster.url)
        let a = try StoreFixture(database: database, instanceID: "a")
        let b = try StoreFixture(reopening: a, instanceID: "b")
        let alice = try await a.account("alice")
        _ = try await a.store.registerDevice(
            address: .apns(StoreFixture.token(1), topic: "com.example.mail", environment: .sandbox),
            accountID: alice.id, sessionID: nil)
        let wakes = Wakes()
        let watch = a.store.watchQueuedSignals { wakes.add() }
        defer { watch.cancel() }
        let before = try await a.deliver(to: "alice", subject: "acknowledged before the loss")

        let old = try cluster.killPrimary()
        let (after, window) = try await untilAvailable(within: 60) {
            try await b.deliver(to: "alice", subject: "after the failover")
        }
        // The monitor's record of the promotion settles a moment after the node takes writes.
        var status = try cluster.status()
        for _ in 0..<60 where status.primary == nil || status.primary == old {
            try await Task.sleep(for: .milliseconds(500))
            status = try cluster.status()
        }
        #expect(status.primary != nil && status.primary != old, "the standby was promoted: \(status)")
        #expect(window < 30, "writable again after \(window) s")

        // The instance that wrote before the loss reads both writes from the new primary.
        let (page, _) = try await untilAvailable(within: 30) { try await a.store.listMessages(accountID: alice.id) }
        #expect(Set(page.messages.map(\.id)) == [before.id, after.id])

        // Its LISTEN moved to the new primary: a commit by the other instance wakes it at once (its own commits
        // wake it locally; its poll is seconds away).
        var settled = wakes.value
        for _ in 0..<20 {
            try await Task.sleep(for: .milliseconds(250))
            if wakes.value == settled { break }
            settled = wakes.value
        }
        _ = try await b.deliver(to: "alice", subject: "told through LISTEN")
        #expect(try await wakes.waitBeyond(settled, seconds: 3), "no wake-up through the new primary's NOTIFY")

        // The old primary comes back as a standby and the pair is synchronous again.
        try cluster.rejoin()
        let rejoined = try cluster.status()
        #expect(rejoined.standbys == [old] && rejoined.synchronous, "\(rejoined)")
        #expect(try await a.store.integrityCheck() == "ok")
    }

    @Test func aConnectionToAServerThatTurnedReadOnlyIsReplacedNotRetriedForever() async throws {
        let cluster = try PostgresCluster()
        let a = try StoreFixture(database: try StoreDatabase(parsing: cluster.url), instanceID: "a")
        _ = try await a.account("alice")
        _ = try await a.deliver(to: "alice", subject: "while writable")
        // The primary refuses writes from now on (as a demoted node would): each pooled connection finds out.
        let admin = try PostgresConnection(url: try cluster.primaryURL())
        try admin.execute("ALTER SYSTEM SET default_transaction_read_only = on")
        _ = try admin.query("SELECT pg_reload_conf()")
        try await Task.sleep(for: .milliseconds(300))
        for _ in 0..<8 {  // more than the pool's connections: every one of them meets the read-only server
            do {
                _ = try await a.deliver(to: "alice", subject: "while read-only")
                Issue.record("a write succeeded on a read-only server")
            } catch MailboxStoreError.storage(let failure) {
                #expect(failure.isUnavailable, "a read-only server is 'unavailable' (503), not an error: \(failure)")
            }
        }
        try admin.execute("ALTER SYSTEM RESET default_transaction_read_only")
        _ = try admin.query("SELECT pg_reload_conf()")
        // Connections made afterwards take writes: none of the read-only ones was kept.
        let (_, seconds) = try await untilAvailable(within: 10) {
            try await a.deliver(to: "alice", subject: "writable again")
        }
        #expect(seconds < 5)
    }
}
