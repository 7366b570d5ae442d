import Foundation
import Locking
import Testing

/// The blocking executor runs work on its own threads, and a task that prefers it runs there too, where each
/// `run` is a call on the same thread rather than a hop to another.
@Suite struct BlockingExecutorTests {
    private static func threadName() -> String { Thread.current.name ?? "" }

    @Test func workRunsOnTheExecutorsThreads() async throws {
        let executor = BlockingExecutor(threads: 2, name: "blocking-test")
        defer { executor.shutdown() }
        let name = try await executor.run { Self.threadName() }
        #expect(name.hasPrefix("blocking-test-"))
    }

    /// Set by a test around a `run`: the body sees it only when it runs inside the caller's task (a call, no hop).
    @TaskLocal static var inCallersTask = false

    @Test func aTaskThatPrefersTheExecutorRunsItsWorkWhereItIs() async throws {
        let executor = BlockingExecutor(threads: 2, name: "blocking-pref")
        defer { executor.shutdown() }
        let (thread, called, calledAgain) = try await Task(executorPreference: executor) {
            try await Self.$inCallersTask.withValue(true) { () async throws -> (String, Bool, Bool) in
                let thread = Self.threadName()
                let called = try await executor.run { Self.inCallersTask }
                await Task.yield()  // back on the executor after a suspension
                return (thread, called, try await executor.run { Self.inCallersTask })
            }
        }.value
        #expect(thread.hasPrefix("blocking-pref-"))
        #expect(called && calledAgain)
        // From a task that does not prefer it, the work is handed to one of its threads.
        let handed = try await Self.$inCallersTask.withValue(true) { try await executor.run { Self.inCallersTask } }
        #expect(!handed)
    }

    @Test func aCallerElsewhereWaitsForTheWorkAndGetsItsError() async {
        struct Refused: Error {}
        let executor = BlockingExecutor(threads: 1, name: "blocking-error")
        defer { executor.shutdown() }
        await #expect(throws: Refused.self) { try await executor.run { throw Refused() } }
    }
}
