import Foundation

/// Threads of its own for blocking work (a synchronous database call, password hashing), awaited from async code
/// so the work never holds a thread of Swift's cooperative pool, which is only as wide as the cores: one slow read
/// or sign-in there would stall every task. Like swift-nio's `NIOThreadPool`.
public final class BlockingExecutor: Sendable {
    private let queue = JobQueue<@Sendable () -> Void>()

    /// Starts `threads` threads named `name-N`.
    public init(threads: Int, name: String) {
        for index in 0..<max(1, threads) {
            Thread.start(named: "\(name)-\(index)") { [queue] in
                while let job = queue.pop() { job() }
            }
        }
    }

    deinit { queue.close() }

    /// Runs `body` on one of the threads and returns its result.
    public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let queued = queue.push { continuation.resume(with: Result { try body() }) }
            if !queued { continuation.resume(throwing: CancellationError()) }
        }
    }

    /// Stops the threads once the work already queued is done.
    public func shutdown() { queue.close() }
}
