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
    }

    /// Counts the times a store's LISTEN connection was made (each tells its observers that changes of every
    /// account may have been missed).
    final class Listens: Sendable {
        private let count = LockedValue(0)
        func observe(_ changes: [CommittedChange]) {
            let made = changes.filter { $0.accountID == CommittedChange.everyAccount }.count
            count.withLock { $0 += made }
        }
        var value: Int { count.withLock { $0 } }
    }

    /// Tries `body` until it succeeds; every failure on the way must be the store's "unavailable" (a 503), never
    /// another error (a 500). `seconds` only guards against a store that never comes back.
    func untilAvailable<T>(within seconds: Double, _ body: () async throws -> T) async throws -> T {
        var outcome: Result<T, any Error>?
        _ = try await eventually(timeout: .seconds(seconds)) {
            do {
                outcome = .success(try await body())
                return true
            } catch MailboxStoreError.storage(let failure) where failure.isUnavailable {
                outcome = .failure(MailboxStoreError.storage(failure))
                return false
            }
        }
        guard let outcome else { throw HarnessError("the store was never tried") }
        return try outcome.get()
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
        let listens = Listens()
        a.store.observeChangesOfEveryInstance { listens.observe($0) }
        let watch = a.store.watchQueuedSignals { wakes.add() }
        defer { watch.cancel() }
        #expect(await eventually { listens.value == 1 }, "the watch never listened")
        let before = try await a.deliver(to: "alice", subject: "acknowledged before the loss")

        let old = try cluster.killPrimary()
        let after = try await untilAvailable(within: 60) {
            try await b.deliver(to: "alice", subject: "after the failover")
        }
        // The monitor's record of the promotion settles a moment after the node takes writes.
        var status = try cluster.status()
        let promoted = try await eventually {
            status = try cluster.status()
            return status.primary != nil && status.primary != old
        }
        #expect(promoted, "the standby was promoted: \(status)")

        // The instance that wrote before the loss reads both writes from the new primary.
        let page = try await untilAvailable(within: 30) { try await a.store.listMessages(accountID: alice.id) }
        #expect(Set(page.messages.map(\.id)) == [before.id, after.id])

        // Its LISTEN moved to the new primary: once it listens there (its second connection, which wakes it once
        // for whatever it missed), a commit by the other instance wakes it (its own commits wake it locally).
        #expect(await eventually { listens.value >= 2 }, "the LISTEN connection was not made again")
        let settled = wakes.value
        _ = try await b.deliver(to: "alice", subject: "told through LISTEN")
        #expect(await eventually { wakes.value > settled }, "no wake-up through the new primary's NOTIFY")

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
        // The server has reloaded its configuration (and signalled every session to) once a session sees it.
        #expect(
            try await eventually {
                try admin.query("SHOW default_transaction_read_only").first?.string("default_transaction_read_only")
                    == "on"
            })
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
        _ = try await untilAvailable(within: 30) {
            try await a.deliver(to: "alice", subject: "writable again")
        }
    }
}
