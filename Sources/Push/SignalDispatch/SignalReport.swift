import MailboxStore

/// What the dispatcher did with one outbox row, for whoever watches it happen (the console): the row, the
/// outcome, the push service's reason for a refusal, and how long the send took. Never the signal's bytes.
public struct SignalReport: Sendable {
    /// The outcome.
    public enum Outcome: String, Sendable {
        /// The push service accepted it.
        case sent
        /// Refused for now; it is tried again after a backoff.
        case retry
        /// The push service said the device is gone; its registration was removed.
        case dropped
        /// Held back by a budget (a background signal past it); sent later, not a failure.
        case deferred
        /// It can never be sent (an app or alias this server cannot signal); dropped.
        case defect
    }

    /// The outbox row.
    public var item: OutboxItem
    /// The outcome.
    public var outcome: Outcome
    /// The push service's reason for a refusal, or the defect.
    public var reason: String?
    /// The send's duration in seconds (0 when nothing was sent).
    public var latency: Double
    /// When the outcome was known (the store's clock).
    public var at: Double
}
