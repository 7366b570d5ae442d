import Foundation
import Locking
import PostgresKit
import Push
import SQLiteKit
import TestSupport
import Testing

@testable import MailboxStore

/// Several processes on one PostgreSQL store: each store here stands for one mailboxd instance, with its own
/// connections and its own name in leases, on a real server.
@Suite struct ScaleOutTests {
    func registerDevice(_ f: StoreFixture, _ account: Account, _ n: Int) async throws {
        try await f.store.registerDevice(
            address: .apns(StoreFixture.token(n), topic: "com.example.mail", environment: .sandbox),
            accountID: account.id,
            sessionID: nil)
    }

    @Test func whatOneInstanceWritesEveryOtherReadsAtOnce() async throws {
        let a = try StoreFixture(engine: .postgres, instanceID: "a")
        let b = try StoreFixture(reopening: a, instanceID: "b")
        #expect(a.store.epoch == b.store.epoch, "one epoch: state strings are valid on every instance")
        let alice = try await a.account("alice")
        let receipt = try await b.deliver(to: "alice", subject: "via b")
        let page = try await a.store.listMessages(accountID: alice.id)
        #expect(page.messages.map(\.subject) == ["via b"])
        #expect(page.state == receipt.state)
        let changes = try await a.store.changes(
            accountID: alice.id, since: try a.store.parseState("\(a.store.epoch)-0"))
        #expect(changes.created.map(\.id) == [receipt.id])
    }

    /// Deliveries to one account from four instances at once: every modseq is taken once, with no gap, and a reader
    /// that saw state S has seen every change at or below S (commit order is modseq order).
    @Test func concurrentInstancesGiveOneAccountGaplessModseqsInCommitOrder() async throws {
        let first = try StoreFixture(engine: .postgres, instanceID: "i0")
        var instances = [first]
        for n in 1..<4 { instances.append(try StoreFixture(reopening: first, instanceID: "i\(n)")) }
        let alice = try await first.account("alice")
        let reader = instances[3]
        let perInstance = 40
        let observed = try await withThrowingTaskGroup(of: [(Int64, Int)].self) { group in
            for (n, instance) in instances.enumerated() {
                group.addTask {
                    for i in 0..<perInstance { _ = try await instance.deliver(to: "alice", subject: "i\(n)-\(i)") }
                    return []
                }
            }
            // Meanwhile a reader checks, again and again, that each state it reads has all its changes.
            group.addTask {
                var seen: [(Int64, Int)] = []
                for _ in 0..<60 {
                    let state = try await reader.store.currentState(accountID: alice.id)
                    let changes = try await reader.store.changes(
                        accountID: alice.id, since: try reader.store.parseState("\(reader.store.epoch)-0"),
                        maxChanges: 5000)
                    let upTo = changes.created.filter { $0.modseq <= state.modseq }.count
                    seen.append((state.modseq, upTo))
                }
                return seen
            }
            var all: [(Int64, Int)] = []
            for try await part in group { all += part }
            return all
        }
        for (state, count) in observed {
            #expect(Int64(count) == state, "at state \(state) the reader saw \(count) changes")
        }
        let final = try await reader.store.changes(
            accountID: alice.id, since: try reader.store.parseState("\(reader.store.epoch)-0"), maxChanges: 5000)
        #expect(final.created.map(\.modseq).sorted() == (1...Int64(4 * perInstance)).map { $0 })
        #expect(try await reader.store.integrityCheck() == "ok")
    }

    /// Two dispatchers claiming at once never take the same row; a starting instance ends only its own leases; a
    /// dead instance's lease runs out and a peer claims the row.
    @Test func claimsSkipEachOthersRowsAndLeasesBelongToTheirOwner() async throws {
        let a = try StoreFixture(engine: .postgres, instanceID: "a")
        let b = try StoreFixture(reopening: a, instanceID: "b")
        let alice = try await a.account("alice")
        for n in 1...40 { try await registerDevice(a, alice, n) }
        async let fromA = a.store.claimDueSignals(limit: 25)
        async let fromB = b.store.claimDueSignals(limit: 25)
        let (claimedA, claimedB) = try await (fromA, fromB)
        #expect(Set(claimedA.map(\.deviceID)).isDisjoint(with: claimedB.map(\.deviceID)))
        #expect(claimedA.count + claimedB.count == 40)

        // B starts again under its own name: it ends its own leases, never A's.
        let restartedB = try StoreFixture(reopening: a, instanceID: "b")
        #expect(try await restartedB.store.releaseSignalLeases() == claimedB.count)
        #expect(
            Set(try await restartedB.store.claimDueSignals(limit: 100).map(\.deviceID)) == Set(claimedB.map(\.deviceID))
        )

        // A dies holding its leases; once they run out (30 s), B signals those devices.
        #expect(try await b.store.claimDueSignals(limit: 100).isEmpty)
        a.advance(31)
        #expect(Set(try await b.store.claimDueSignals(limit: 100).map(\.deviceID)).count == 40)
    }

    /// Sixteen requests for the key's token at once, from two instances: one signature, one token for all; a new
    /// one only once it is due; a refused token replaced only once it is old enough to be.
    @Test(arguments: StoreEngineKind.allCases)
    func instancesShareOneProviderTokenPerKey(engine: StoreEngineKind) async throws {
        let a = try StoreFixture(engine: engine, instanceID: "a")
        let b = try StoreFixture(reopening: a, instanceID: "b")
        let signatures = LockedValue(0)
        let sign: @Sendable (Double) throws -> String = { issued in
            signatures.withLock { $0 += 1 }
            return "token-\(Int(issued))"
        }
        func ask(_ f: StoreFixture, replacing stale: String? = nil) async throws -> String {
            try await f.store.sharedProviderToken(
                key: "TEAM.KEY", maxAge: 3000, replacing: stale, minimumAge: 1200, sign: sign
            ).token
        }
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for n in 0..<16 { group.addTask { try await ask(n % 2 == 0 ? a : b) } }
            var all: [String] = []
            for try await token in group { all.append(token) }
            return all
        }
        #expect(Set(tokens).count == 1)
        #expect(signatures.withLock { $0 } == 1)
        let first = tokens[0]
        a.advance(600)
        #expect(try await ask(b, replacing: first) == first, "refused but younger than 20 minutes: kept")
        a.advance(700)
        let replaced = try await ask(b, replacing: first)
        #expect(replaced != first)
        #expect(try await ask(a) == replaced, "the other instance adopts it")
        a.advance(3001)
        #expect(try await ask(a) != replaced, "due after 50 minutes")
        #expect(signatures.withLock { $0 } == 3)
    }

    @Test(arguments: StoreEngineKind.allCases)
    func timedEventsAreCountedAcrossInstances(engine: StoreEngineKind) async throws {
        let a = try StoreFixture(engine: engine, instanceID: "a")
        let b = try StoreFixture(reopening: a, instanceID: "b")
        for _ in 0..<3 {
            try await a.store.recordEvent("login-user:alice", keep: 300)
            a.advance(10)
        }
        #expect(try await b.store.recentEvents("login-user:alice", within: 300).count == 3)
        #expect(try await b.store.recentEvents("login-user:alice", within: 15).count == 1)
        try await b.store.forgetEvents("login-user:alice")
        #expect(try await a.store.recentEvents("login-user:alice", within: 300).isEmpty)
    }

    @Test func instancesStartingAtOnceMigrateOnceAndShareOneEpoch() async throws {
        let url = try PostgresServer.shared().makeDatabase()
        let epochs = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    var configuration = MailboxStore.Configuration()
                    configuration.postgresConnections = 1
                    return try MailboxStore(database: .postgres(url: url), configuration: configuration).epoch
                }
            }
            var all: [String] = []
            for try await epoch in group { all.append(epoch) }
            return all
        }
        #expect(Set(epochs).count == 1)
        let store = try MailboxStore(database: .postgres(url: url))
        #expect(try await store.appliedMigrations().count == MailboxStore.migrations.count)
    }

    @Test(arguments: StoreEngineKind.allCases)
    func aDatabaseFromANewerBuildIsRefused(engine: StoreEngineKind) async throws {
        let f = try StoreFixture(engine: engine)
        switch f.database {
        case .postgres(let url):
            let db = try PostgresConnection(url: url)
            try db.run("INSERT INTO schema_migrations (name, applied_at) VALUES ('999-from-the-future', 0)")
        case .sqlite(let path):
            let db = try Database(path: path)
            try db.run("INSERT INTO schema_migrations (name, applied_at) VALUES ('999-from-the-future', 0)")
        }
        #expect(throws: MailboxStoreError.schemaTooNew("999-from-the-future")) {
            _ = try StoreFixture(reopening: f)
        }
    }

    @Test func aMalformedDatabaseURLIsAClearError() throws {
        #expect(throws: MailboxStoreError.self) { try StoreDatabase(parsing: "mysql://root@localhost/mail") }
        #expect(throws: MailboxStoreError.self) { try StoreDatabase(parsing: "postgresql://") }
        #expect(throws: MailboxStoreError.self) { try StoreDatabase(parsing: "sqlite:") }
        #expect(try StoreDatabase(parsing: "sqlite:/tmp/x.sqlite") == .sqlite(path: "/tmp/x.sqlite"))
        #expect(try StoreDatabase(parsing: "data/mailbox.sqlite") == .sqlite(path: "data/mailbox.sqlite"))
        let withPassword = try StoreDatabase(parsing: "postgresql://mail:s3cret@db.internal:5432/mail")
        #expect(!withPassword.description.contains("s3cret"), "no password in logs")
        // libpq's host list (a cluster) is taken as written; a bad list is refused with what is wrong.
        let list = "postgresql://mail:s3cret@db1:5432,[fd00::2]:5433,db3/mail?target_session_attrs=read-write"
        #expect(try StoreDatabase(parsing: list) == .postgres(url: list))
        #expect(try PostgresURL(list).hosts.map(\.host) == ["db1", "fd00::2", "db3"])
        #expect(try PostgresURL(list).hosts.map(\.port) == [5432, 5433, nil])
        #expect(try StoreDatabase(parsing: list).description == list.replacingOccurrences(of: "s3cret", with: "***"))
        let inQuery = try StoreDatabase(parsing: "postgresql://db1,db2/mail?user=mail&password=s3cret")
        #expect(!inQuery.description.contains("s3cret"), "\(inQuery)")
        for bad in [
            "postgresql://db1,,db2/mail", "postgresql://db1:0/mail", "postgresql://db1:5432x/mail",
            "postgresql://db1,[::1/mail", "postgresql://db1,d b2/mail", "postgresql://db1,db<2>/mail",
            "postgresql://db1,db2:port/mail", "postgresql://db1,[::1]x/mail", "postgresql://db1,[zz]/mail",
            "postgresql://db1,db2/ma%zz", "postgresql://db1,db2/mail?password=%0", "postgresql://us%00er@db1/mail",
        ] {
            #expect(throws: MailboxStoreError.self, "\(bad)") { try StoreDatabase(parsing: bad) }
        }
    }
}
