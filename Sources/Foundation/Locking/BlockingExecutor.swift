import Foundation

/// Threads of its own for blocking work (a synchronous database call, password hashing), awaited from async code
/// so the work never holds a thread of Swift's cooperative pool, which is only as wide as the cores: one slow read
/// or sign-in there would stall every task. Like swift-nio's `NIOThreadPool`.
///
/// It is also a task executor: a task that prefers it (`Task(executorPreference:)`, for a request that reads the
/// store several times) runs on its threads, and there each ``run(_:)`` is a call rather than two thread hops.
public final class BlockingExecutor: TaskExecutor, Sendable {
    private let queue = JobQueue<@Sendable () -> Void>()

    /// Starts `threads` threads named `name-N`.
    public init(threads: Int, name: String) {
        for index in 0..<max(1, threads) {
            Thread.start(named: "\(name)-\(index)") { [queue] in
                pthread_setspecific(Self.threadOwner, Unmanaged.passUnretained(queue).toOpaque())
                while let job = queue.pop() { job() }
            }
        }
    }

    deinit { queue.close() }

    /// Runs `body` on one of the threads and returns its result: at once when the caller is on one already.
    public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        if isCurrent { return try body() }
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let queued = queue.push { continuation.resume(with: Result { try body() }) }
            if !queued { continuation.resume(throwing: CancellationError()) }
        }
    }

    /// Runs a job of a task that prefers this executor on one of its threads (on the caller's after
    /// ``shutdown()``, so no task is left waiting).
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        if !queue.push({ job.runSynchronously(on: executor) }) { job.runSynchronously(on: executor) }
    }

    /// Stops the threads once the work already queued is done.
    public func shutdown() { queue.close() }

    /// Whether the calling thread is one of this executor's.
    private var isCurrent: Bool {
        pthread_getspecific(Self.threadOwner) == Unmanaged.passUnretained(queue).toOpaque()
    }

    /// Each executor thread's owner: its executor's queue.
    private static let threadOwner: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()
}
