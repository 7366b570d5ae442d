import Foundation

/// The result of ``APNsClient/benchmark(count:concurrency:makeNotification:)``.
public struct APNsBenchmarkResult: Sendable, Hashable {
    /// Notifications attempted.
    public var count: Int
    /// Notifications APNs accepted.
    public var succeeded: Int
    /// Notifications that failed (any ``APNsClientError``).
    public var failed: Int
    /// Wall time from the first send to the last answer.
    public var elapsed: Duration
    /// Answers per second (`count / elapsed`).
    public var rate: Double

    /// Creates a result.
    public init(count: Int, succeeded: Int, failed: Int, elapsed: Duration) {
        self.count = count
        self.succeeded = succeeded
        self.failed = failed
        self.elapsed = elapsed
        let seconds = elapsed.seconds
        rate = seconds > 0 ? Double(count) / seconds : 0
    }
}

extension APNsClient {
    /// Sends `count` notifications, `concurrency` at a time (single attempts, no retries), and measures the rate.
    ///
    /// `makeNotification(i)` builds the i-th notification (`0..<count`).
    public func benchmark(
        count: Int, concurrency: Int, makeNotification: @escaping @Sendable (Int) -> APNsNotification
    ) async -> APNsBenchmarkResult {
        let workers = max(1, min(concurrency, count))
        let clock = ContinuousClock()
        let start = clock.now
        let (succeeded, failed) = await withTaskGroup(of: (Int, Int).self) { group in
            for worker in 0..<workers {
                group.addTask {
                    var ok = 0
                    var bad = 0
                    // Worker w sends notifications w, w + workers, w + 2 * workers, …
                    for index in stride(from: worker, to: count, by: workers) {
                        do {
                            _ = try await self.send(makeNotification(index))
                            ok += 1
                        } catch {
                            bad += 1
                        }
                    }
                    return (ok, bad)
                }
            }
            var totals = (0, 0)
            for await (ok, bad) in group {
                totals.0 += ok
                totals.1 += bad
            }
            return totals
        }
        return APNsBenchmarkResult(count: count, succeeded: succeeded, failed: failed, elapsed: clock.now - start)
    }
}
