import Foundation

/// A queue of work for a fixed set of threads: jobs in arrival order, each taken by whichever thread is free.
/// The threads' loop is `while let job = queue.pop() { … }`; ``close()`` lets them finish what is queued and end.
public final class JobQueue<Job>: @unchecked Sendable {  // `condition` guards `jobs`, `head`, `idle` and `closed`
    private let condition = NSCondition()
    private var jobs: [Job] = []
    private var head = 0
    private var closed = false
    /// Threads waiting in ``pop()`` (or woken and not yet back): a push with none skips the wake-up.
    private var idle = 0

    /// An empty, open queue.
    public init() {}

    /// Queues `job`; returns `false` (and drops it) once the queue is closed.
    @discardableResult
    public func push(_ job: Job) -> Bool {
        condition.lock()
        guard !closed else {
            condition.unlock()
            return false
        }
        jobs.append(job)
        let wake = idle > 0
        condition.unlock()
        // Signalled after the lock is let go, so the thread it wakes does not wait at once for that lock; a thread
        // that was busy looks at the queue again before it waits.
        if wake { condition.signal() }
        return true
    }

    /// The next job, waiting for one; `nil` once the queue is closed and empty.
    public func pop() -> Job? {
        condition.lock()
        defer { condition.unlock() }
        while head == jobs.count && !closed {
            idle += 1
            condition.wait()
            idle -= 1
        }
        guard head < jobs.count else { return nil }
        let job = jobs[head]
        head += 1
        if head > 256 && head * 2 > jobs.count {
            jobs.removeFirst(head)
            head = 0
        }
        return job
    }

    /// Refuses new jobs; the threads end once the queued ones are done.
    public func close() {
        condition.lock()
        closed = true
        condition.broadcast()
        condition.unlock()
    }
}
