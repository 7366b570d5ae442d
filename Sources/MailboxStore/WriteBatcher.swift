import Dispatch
import Foundation
import SQLiteKit

/// Group commit: write operations queued from many tasks run together in one `BEGIN IMMEDIATE` transaction,
/// each inside its own savepoint, so one failing operation does not undo the others and a burst of
/// deliveries costs one fsync instead of one per message. Callers resume only after the COMMIT.
final class WriteBatcher: @unchecked Sendable {  // `lock` guards `pending` and `draining`
    private struct Job {
        /// Runs the operation inside the batch; returns whether it succeeded.
        let run: (Database) -> Bool
        /// Delivers the operation's outcome once the batch is committed (or rolled back).
        let finish: (_ commitError: (any Error)?) -> Void
    }

    private let pool: DatabasePool
    private let maximumBatch: Int
    private let lock = NSLock()
    private var pending: [Job] = []
    private var draining = false
    private let queue = DispatchQueue(label: "signalfetch.mailboxstore.writer", qos: .userInitiated)
    private var batchesCommitted = 0

    private let lingerMicroseconds: UInt32

    init(pool: DatabasePool, maximumBatch: Int = 512, lingerMicroseconds: UInt32 = 200) {
        self.pool = pool
        self.maximumBatch = maximumBatch
        self.lingerMicroseconds = lingerMicroseconds
    }

    /// Transactions committed so far (a batch is one transaction).
    var committedBatches: Int { lock.withLock { batchesCommitted } }

    /// Runs `body` in the next group-committed transaction and returns its result after the commit.
    func perform<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            nonisolated(unsafe) var outcome: Result<T, any Error>?
            let job = Job(
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
                        continuation.resume(throwing: commitError)
                    } else {
                        continuation.resume(with: outcome ?? .failure(commitError ?? CancellationError()))
                    }
                })
            enqueue(job)
        }
    }

    private func enqueue(_ job: Job) {
        let startDrain = lock.withLock { () -> Bool in
            pending.append(job)
            if draining { return false }
            draining = true
            return true
        }
        if startDrain { queue.async { self.drain() } }
    }

    private func drain() {
        var previousBatch = 0
        while true {
            // When fewer writers are waiting than joined the last batch, the others are usually a few
            // microseconds from enqueueing (they were just resumed by the last commit): linger briefly so they
            // share this transaction's fsync instead of paying for the next one.
            if lock.withLock({ pending.count }) < previousBatch {
                usleep(lingerMicroseconds)
            }
            let batch = lock.withLock { () -> [Job] in
                let taken = Array(pending.prefix(maximumBatch))
                pending.removeFirst(taken.count)
                if taken.isEmpty { draining = false }
                return taken
            }
            if batch.isEmpty { return }
            previousBatch = batch.count
            var commitError: (any Error)?
            do {
                try pool.writeWithoutTransaction { db in
                    try db.transaction(.immediate) {
                        for job in batch { _ = job.run(db) }
                    }
                }
            } catch {
                commitError = error
            }
            lock.withLock { batchesCommitted += commitError == nil ? 1 : 0 }
            for job in batch { job.finish(commitError) }
        }
    }
}
