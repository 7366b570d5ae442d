import Dispatch
import Durations
import Foundation
import SQLiteKit

/// Group commit: write operations queued from many tasks run together in one `BEGIN IMMEDIATE` transaction,
/// each inside its own savepoint, so one failing operation does not undo the others and a burst of
/// deliveries costs one fsync instead of one per message. Callers resume only after the COMMIT.
///
/// An operation may also defer part of its work to the end of the batch (see `BatchLedger`): the deferred work
/// is settled before the next operation that does not defer runs, and before the COMMIT, inside the same
/// transaction, so readers never see one without the other.
///
/// The writer opens the transaction as soon as one operation is queued and runs operations as they arrive,
/// so the SQL of a batch overlaps with the callers still preparing theirs. It commits when the queue is empty
/// and as many operations have joined as there were writers about at the last commit (the callers it released
/// are usually a few microseconds from queueing again), or when the linger time since the transaction began is
/// up.
final class WriteBatcher: @unchecked Sendable {  // `condition` guards `pending`, `draining`, `writerWaiting`
    /// Work that operations leave for the end of their batch.
    struct DeferredWork: Sendable {
        /// Writes what deferring operations left pending (a no-op when nothing is).
        let settle: @Sendable (Database) throws -> Void
        /// Runs after the batch committed, before ``discard``.
        let committed: @Sendable () -> Void
        /// Forgets whatever is pending: the batch is over, committed or rolled back.
        let discard: @Sendable () -> Void

        /// No deferred work.
        static let none = DeferredWork(settle: { _ in }, committed: {}, discard: {})
    }

    private struct Job {
        /// Whether the operation defers work to the batch's end, so pending work need not be settled first.
        let defers: Bool
        /// Runs the operation inside the batch; returns whether it succeeded.
        let run: (Database) -> Bool
        /// Delivers the operation's outcome once the batch is committed (or rolled back).
        let finish: (_ commitError: (any Error)?) -> Void
    }

    private let pool: DatabasePool
    private let maximumBatch: Int
    private let condition = NSCondition()
    private var pending: [Job] = []
    private var draining = false
    /// Whether the writer is waiting on `condition` for more operations.
    private var writerWaiting = false
    private var totals = WriterStatistics()
    private let queue = DispatchQueue(label: "signalfetch.mailboxstore.writer", qos: .userInitiated)
    private let lingerNanoseconds: UInt64
    private let deferred: DeferredWork

    init(
        pool: DatabasePool, maximumBatch: Int = 512, lingerMicroseconds: UInt32 = 200,
        deferred: DeferredWork = .none
    ) {
        self.pool = pool
        self.deferred = deferred
        self.maximumBatch = max(1, maximumBatch)
        self.lingerNanoseconds = UInt64(lingerMicroseconds) * 1_000
    }

    /// What the writer has committed so far.
    var statistics: WriterStatistics {
        condition.lock()
        defer { condition.unlock() }
        return totals
    }

    /// Runs `body` in the next group-committed transaction and returns its result after the commit. With
    /// `defers`, `body` may leave work in the batch's deferred work; without, that work is settled before it.
    func perform<T: Sendable>(
        defers: Bool = false, _ body: @escaping @Sendable (Database) throws -> T
    )
        async throws -> T
    {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            submit(defers: defers, body) { continuation.resume(with: $0) }
        }
    }

    /// ``perform(defers:_:)`` without a task: `completion` runs on the writer's thread once the transaction
    /// committed (or failed), for a caller on a thread of its own that waits for it.
    func submit<T: Sendable>(
        defers: Bool, _ body: @escaping @Sendable (Database) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        nonisolated(unsafe) var outcome: Result<T, any Error>?
        let job = Job(
            defers: defers,
            run: { db in
                do {
                    outcome = .success(try db.savepoint { try body(db) })
                    return true
                } catch {
                    outcome = .failure(error)
                    return false
                }
            },
            finish: { commitError in
                if let commitError, case .success = outcome {
                    completion(.failure(commitError))
                } else {
                    completion(outcome ?? .failure(commitError ?? CancellationError()))
                }
            })
        enqueue(job)
    }

    private func enqueue(_ job: Job) {
        condition.lock()
        pending.append(job)
        let startDrain = !draining
        draining = true
        if writerWaiting { condition.signal() }
        condition.unlock()
        if startDrain { queue.async { self.drain() } }
    }

    /// Takes up to `limit` queued operations. When none is queued: waits until `deadline` (``MonotonicTime``
    /// nanoseconds) for one if `deadline` is given, else (or when it passes) returns none; with `stopWhenEmpty`, an
    /// empty queue also ends the drain.
    private func take(limit: Int, waitingUntil deadline: UInt64?, stopWhenEmpty: Bool) -> [Job] {
        condition.lock()
        defer { condition.unlock() }
        if pending.isEmpty, let deadline {
            writerWaiting = true
            while pending.isEmpty {
                let now = MonotonicTime.nanoseconds()
                if now >= deadline { break }
                _ = condition.wait(until: Date(timeIntervalSinceNow: Double(deadline - now) / 1e9))
            }
            writerWaiting = false
        }
        if pending.isEmpty {
            if stopWhenEmpty { draining = false }
            return []
        }
        let taken = Array(pending.prefix(limit))
        pending.removeFirst(taken.count)
        return taken
    }

    private func drain() {
        // How many writers are about: those the last batch released (expected back) and those that queued
        // while it committed. The next batch waits for that many, up to the linger time.
        var expected = 0
        while true {
            // After a batch, wait up to the linger time for the released writers before ending the drain: a
            // restarted drain costs a thread wake-up, and more often than not it came right back.
            var joined = take(
                limit: maximumBatch,
                waitingUntil: expected > 0 ? MonotonicTime.nanoseconds() + lingerNanoseconds : nil,
                stopWhenEmpty: true)
            if joined.isEmpty { return }
            let deadline = MonotonicTime.nanoseconds() + lingerNanoseconds
            var batch = joined
            var commitError: (any Error)?
            // When the transaction's body ended: from there to `transaction` returning is the COMMIT.
            var bodyEnd: UInt64 = 0
            do {
                try pool.writeWithoutTransaction { db in
                    try db.transaction(.immediate) {
                        while true {
                            for job in joined {
                                if !job.defers { try deferred.settle(db) }
                                _ = job.run(db)
                            }
                            let room = maximumBatch - batch.count
                            if room == 0 { break }
                            joined = take(
                                limit: room, waitingUntil: batch.count < expected ? deadline : nil,
                                stopWhenEmpty: false)
                            if joined.isEmpty { break }
                            batch += joined
                        }
                        try deferred.settle(db)
                        bodyEnd = MonotonicTime.nanoseconds()
                    }
                }
            } catch {
                commitError = error
            }
            let commitNanoseconds = MonotonicTime.nanoseconds() - bodyEnd
            if commitError == nil { deferred.committed() }
            deferred.discard()
            condition.lock()
            if commitError == nil {
                totals.batches += 1
                totals.writes += batch.count
                totals.commitSeconds += Double(commitNanoseconds) / 1e9
            }
            expected = batch.count + pending.count
            condition.unlock()
            for job in batch { job.finish(commitError) }
        }
    }
}
