import Foundation

/// A queue of work for a fixed set of threads: jobs in arrival order, each taken by whichever thread is free.
/// The threads' loop is `while let job = queue.pop() { … }`; ``close()`` lets them finish what is queued and end.
public final class JobQueue<Job>: @unchecked Sendable {  // `condition` guards `jobs`, `head` and `closed`
    private let condition = NSCondition()
    private var jobs: [Job] = []
    private var head = 0
    private var closed = false

    /// An empty, open queue.
    public init() {}

    /// Queues `job`; returns `false` (and drops it) once the queue is closed.
    @discardableResult
    public func push(_ job: Job) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !closed else { return false }
        jobs.append(job)
        condition.signal()
        return true
    }

    /// The next job, waiting for one; `nil` once the queue is closed and empty.
    public func pop() -> Job? {
        condition.lock()
        defer { condition.unlock() }
        while head == jobs.count && !closed { condition.wait() }
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
