import Durations
import Foundation
import MailboxStore
import Push
import SQLiteKit

/// MailboxStore benchmarks: group-committed deliveries against one transaction per message, and the cost of
/// `changes` in a small and a large mailbox.
enum StoreBenchmarks {
    /// The size of a WAL file that has reached SQLite's automatic checkpoint (1,000 frames of a 4 KiB page and
    /// its 24-byte header, after the 32-byte file header). Past it the checkpoint runs and the next commit
    /// writes from the start of the file again.
    static let checkpointedWALSize = 32 + 1_000 * (4_096 + 24)

    /// Delivers in steps of `step` until the WAL at `path` has reached its checkpoint size, then once more, so
    /// the timed part measures a running server (commits overwrite WAL space) rather than a fresh file that
    /// every commit extends: on ext4 an fdatasync that grows a file costs about twice one that overwrites.
    /// A group commit writes about a sixth of the frames per delivery that a lone transaction does, so a fixed
    /// number of warm-up deliveries left a third of the grouped run still extending its WAL.
    static func warmUp(
        path: String, step: Int, from first: Int, deliver: (Range<Int>) async throws -> Void
    )
        async throws -> Int
    {
        var next = first
        var wrapped = false
        while !wrapped {
            let size = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
            wrapped = size >= checkpointedWALSize
            try await deliver(next..<next + step)
            next += step
        }
        return next
    }

    static func makeStore(path: String, synchronous: SynchronousMode) async throws -> MailboxStore {
        var configuration = MailboxStore.Configuration()
        configuration.synchronous = synchronous
        configuration.passwordParameters = .init(logN: 10, r: 8, p: 1)
        let store = try MailboxStore(path: path, configuration: configuration)
        if try await store.account(username: "bench") == nil {
            let account = try await store.createAccount(username: "bench", password: "bench-password")
            for n in 1...2 {
                try await store.registerDevice(
                    address: PushAddress(
                        service: .apns, token: String(repeating: String(format: "%02x", n), count: 32),
                        app: "com.example.mail", environment: .sandbox),
                    accountID: account.id, sessionID: nil)
            }
        }
        return store
    }

    /// The body every benchmark message carries (560 bytes), built once: a producer hands the store a message
    /// it already holds, so building the text is not part of a delivery's cost.
    static let body = String(repeating: "Lorem ipsum dolor sit amet. ", count: 20)

    static func message(_ i: Int) -> NewMessage {
        NewMessage(to: "bench", from: "sender\(i)@example.com", subject: "Benchmark message \(i)", body: body)
    }

    /// One side-by-side measurement of ``deliveryRates(groupPath:singlePath:synchronous:count:producers:chunks:)``.
    struct DeliveryRates {
        /// Deliveries per second through the group-committing store.
        var group: Double
        /// Deliveries per second with one transaction per message.
        var single: Double
        /// Transactions the store committed for the timed deliveries.
        var batches: Int
        /// Mean time of the store's COMMIT statements, and of the one-message transactions' COMMITs, in seconds.
        var groupCommit: Double
        var singleCommit: Double
        /// Mean time per transaction of the same producers making writes that change nothing (see
        /// ``machineryCycle(store:count:producers:)``), in seconds.
        var machinery: Double
    }

    /// The group-commit machinery with no rows to write: the same producers, each asking the store to mark an
    /// unread message unread. Such a write reads the message (one indexed lookup), finds nothing to change and
    /// writes nothing, so its transaction commits without an fsync; what is left is that read, the producers'
    /// turnaround (the hand-off to the writer and back) and the writer's wake-ups. Returns the mean time per
    /// transaction, in seconds.
    static func machineryCycle(store: MailboxStore, count: Int, producers: Int) async throws -> Double {
        guard let account = try await store.account(username: "bench"),
            let message = try await store.listMessages(accountID: account.id, limit: 1).messages.first, !message.seen
        else { throw BenchError("the bench account has no unread message") }
        let before = store.writerStatistics
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for p in 0..<producers {
                group.addTask {
                    for _ in stride(from: p, to: count, by: producers) {
                        let unchanged = try await store.updateMessage(
                            id: message.id, accountID: account.id, seen: false)
                        guard unchanged.modseq == message.modseq else {
                            throw BenchError("a write that changed nothing bumped the modseq")
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let elapsed = (ContinuousClock.now - start).seconds
        return elapsed / Double(max(1, store.writerStatistics.batches - before.batches))
    }

    /// Delivery rates through the group-committing store (`producers` concurrent producers) and with one
    /// transaction per message, each on its own file. After the same warm-up on both, the two sides take turns in
    /// `chunks` slices of `count / chunks` deliveries and only the time inside each side's slices is summed, so
    /// both see the same moments of the disk (whose fsync latency drifts by several times within minutes).
    static func deliveryRates(
        groupPath: String, singlePath: String, synchronous: SynchronousMode, count: Int, producers: Int,
        chunks: Int = 5
    ) async throws -> DeliveryRates {
        let store = try await makeStore(path: groupPath, synchronous: synchronous)
        let single = try await SingleTransactionWriter(path: singlePath, synchronous: synchronous)
        func grouped(_ range: Range<Int>) async throws {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for p in 0..<producers {
                    group.addTask {
                        for i in stride(from: range.lowerBound + p, to: range.upperBound, by: producers) {
                            _ = try await store.deliver(message(i))
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        let groupWarmUp = try await warmUp(path: groupPath, step: 64, from: 0) { try await grouped($0) }
        let singleWarmUp = try await warmUp(path: singlePath, step: 64, from: 0) { range in
            for i in range { try single.deliver(i) }
        }
        let warmUpDeliveries = max(groupWarmUp, singleWarmUp)

        let writerBefore = store.writerStatistics
        let singleCommitBefore = single.commitSeconds
        var groupTime = Duration.zero
        var singleTime = Duration.zero
        let slice = max(1, count / chunks)
        var next = warmUpDeliveries
        while next < warmUpDeliveries + count {
            let range = next..<min(next + slice, warmUpDeliveries + count)
            let groupStart = ContinuousClock.now
            try await grouped(range)
            groupTime += ContinuousClock.now - groupStart
            let singleStart = ContinuousClock.now
            for i in range { try single.deliver(i) }
            singleTime += ContinuousClock.now - singleStart
            next = range.upperBound
        }
        let writer = store.writerStatistics
        let batches = writer.batches - writerBefore.batches
        FileHandle.standardError.write(
            Data("store: \(synchronous.rawValue) \(count) deliveries in \(batches) transactions\n".utf8))
        let machinery = try await machineryCycle(store: store, count: count, producers: producers)
        return DeliveryRates(
            group: Double(count) / groupTime.seconds, single: Double(count) / singleTime.seconds, batches: batches,
            groupCommit: (writer.commitSeconds - writerBefore.commitSeconds) / Double(max(1, batches)),
            singleCommit: (single.commitSeconds - singleCommitBefore) / Double(count), machinery: machinery)
    }

    /// The same rows with one transaction per message: the work a delivery does (insert, modseq bump, outbox
    /// upsert), committed alone each time.
    final class SingleTransactionWriter {
        private let pool: DatabasePool
        private let account: Int64
        private let inbox: Int64
        /// Seconds spent in COMMIT statements so far.
        private(set) var commitSeconds = 0.0

        init(path: String, synchronous: SynchronousMode) async throws {
            _ = try await makeStore(path: path, synchronous: synchronous)
            var configuration = DatabaseConfiguration()
            configuration.synchronous = synchronous
            let pool = try DatabasePool(path: path, configuration: configuration)
            let account = try pool.read { try $0.scalar("SELECT id FROM accounts WHERE username = 'bench'").int64! }
            inbox = try pool.read {
                try $0.scalar("SELECT id FROM mailboxes WHERE account_id = ? AND public_id = 'inbox'", account).int64!
            }
            self.pool = pool
            self.account = account
        }

        /// Delivers message `i` in a transaction of its own.
        func deliver(_ i: Int) throws {
            let m = message(i)
            let account = account
            let inbox = inbox
            // From the end of the transaction's body to `write` returning is the COMMIT.
            let bodyEnd = try pool.write { db -> ContinuousClock.Instant in
                try db.run("UPDATE accounts SET modseq = modseq + 1 WHERE id = ?", account)
                let modseq = try db.scalar("SELECT modseq FROM accounts WHERE id = ?", account).int64!
                try db.run(
                    """
                    INSERT INTO messages (public_id, account_id, mailbox_id, from_addr, to_addr, subject, preview,
                        body, size, received_at, created_modseq, modseq)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                    arguments: [
                        "single-\(i)", account, inbox, m.from, m.to, m.subject, String(m.body.prefix(120)), m.body,
                        m.body.utf8.count, Date().timeIntervalSince1970, modseq, modseq,
                    ])
                try db.run(
                    """
                    INSERT INTO signal_outbox (device_id, modseq, due_at)
                    SELECT id, ?, ? FROM devices WHERE account_id = ?
                    ON CONFLICT (device_id) DO UPDATE SET modseq = excluded.modseq
                    """, modseq, Date().timeIntervalSince1970, account)
                return ContinuousClock.now
            }
            commitSeconds += (ContinuousClock.now - bodyEnd).seconds
        }
    }

    /// Median latency (ms) of `changes` for the last 100 deliveries in a mailbox of `size` messages.
    /// A mailbox of `size` messages plus 100 new deliveries, and the state it had before them.
    struct ChangesFixture {
        let store: MailboxStore
        let accountID: Int64
        let since: SyncState

        /// The time of one `changes` call that returns the 100 new messages, in milliseconds.
        func sample() async throws -> Double {
            let start = ContinuousClock.now
            let changes = try await store.changes(accountID: accountID, since: since, maxChanges: 500)
            let elapsed = seconds(since: start) * 1000
            guard changes.created.count == 100 else { throw BenchError("expected 100 changes") }
            return elapsed
        }
    }

    static func changesFixture(path: String, size: Int) async throws -> ChangesFixture {
        let store = try await makeStore(path: path, synchronous: .normal)
        let pool = try DatabasePool(path: path)
        let account = try require(try await store.account(username: "bench"))
        // Bulk-load the mailbox directly (a recursive CTE), then catch the account's modseq up.
        try pool.write { db in
            let inbox = try db.scalar(
                "SELECT id FROM mailboxes WHERE account_id = ? AND public_id = 'inbox'", account.id
            ).int64!
            try db.run(
                """
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
                INSERT INTO messages (public_id, account_id, mailbox_id, from_addr, to_addr, subject, preview, body,
                    size, received_at, seen, created_modseq, modseq)
                SELECT 'bulk-' || i, ?, ?, 'a@example.com', 'bench', 'Subject ' || i, 'preview', 'body', 4,
                    1700000000 + i, 1, i, i FROM n
                """, size, account.id, inbox)
            try db.run("UPDATE accounts SET modseq = ? WHERE id = ?", size, account.id)
        }
        let since = try await store.currentState(accountID: account.id)
        for i in 0..<100 { _ = try await store.deliver(message(i)) }
        return ChangesFixture(store: store, accountID: account.id, since: since)
    }

    /// Median `changes` latency (ms) for 100 new messages in a small and a large mailbox, sampled alternately so
    /// both see the same machine.
    static func changesLatency(
        small: ChangesFixture, large: ChangesFixture
    ) async throws -> (small: Double, large: Double) {
        var smallSamples: [Double] = []
        var largeSamples: [Double] = []
        for _ in 0..<5 {  // warm both caches
            _ = try await small.sample()
            _ = try await large.sample()
        }
        for _ in 0..<100 {
            smallSamples.append(try await small.sample())
            largeSamples.append(try await large.sample())
        }
        return (smallSamples.sorted()[smallSamples.count / 2], largeSamples.sorted()[largeSamples.count / 2])
    }

    /// A child process for crash drills: delivers from 8 concurrent producers forever and prints each delivered
    /// message id on its own line after the store acknowledged it.
    static func crashWriter(path: String) async throws -> Never {
        let store = try await makeStore(path: path, synchronous: .full)
        let output = FileHandle.standardOutput
        let lock = NSLock()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for p in 0..<8 {
                group.addTask {
                    var i = p
                    while true {
                        let receipt = try await store.deliver(message(i))
                        lock.withLock { output.write(Data("\(receipt.id)\n".utf8)) }
                        i += 8
                    }
                }
            }
            try await group.waitForAll()
        }
        exit(1)
    }
}

func require<T>(_ value: T?) throws -> T {
    guard let value else { throw BenchError("missing value") }
    return value
}
