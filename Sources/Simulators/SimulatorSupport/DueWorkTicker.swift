import HTTPServer

/// The periodic processing of a simulator gateway's delayed work (throttled messages, expirations): each round
/// runs inside `batch`, so the device streams it feeds wake once per round.
package enum DueWorkTicker {
    /// Runs `work` every `interval` until the returned task is cancelled.
    package static func start(
        every interval: Duration, batch: EventStreamBatch, _ work: @escaping @Sendable () -> Void
    ) -> Task<Void, Never> {
        Task.detached {
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                batch.run { work() }
            }
        }
    }
}
