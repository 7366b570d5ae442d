/// The retry schedule of a push that failed (a device's signal, a JMAP StateChange): exponential backoff with full
/// jitter, no sooner than what the push service asked for. The one place a retry delay is computed, for every
/// service.
public struct Backoff: Sendable, Equatable {
    /// The ceiling of the first retry, in seconds; it doubles per failed attempt.
    public var base: Double
    /// The largest ceiling, in seconds.
    public var maximum: Double
    /// The shortest delay, in seconds (never a busy loop).
    public var minimum: Double

    /// Creates a schedule.
    public init(base: Double = 0.5, maximum: Double = 60, minimum: Double = 0.05) {
        self.base = base
        self.maximum = maximum
        self.minimum = minimum
    }

    /// The delay before retry number `attempt` (1 for the first retry): uniform in [0, ceiling] with the ceiling
    /// `base · 2^(attempt-1)` capped at `maximum`, raised to `retryAfter` when the service gave one (at most
    /// ``longestRetryAfter``; ignored unless finite). `unit` is
    /// the random draw in [0, 1].
    public func delay(attempt: Int, retryAfter: Double?, unit: Double) -> Double {
        let exponent = Double(min(max(attempt, 1), 62) - 1)
        let ceiling = min(maximum, base * Double(sign: .plus, exponent: Int(exponent), significand: 1))
        // A service's Retry-After is taken up to a day; a value that is not a finite number is ignored.
        let asked = retryAfter.flatMap { $0.isFinite ? min(max($0, 0), Self.longestRetryAfter) : nil } ?? 0
        return max(ceiling * min(max(unit, 0), 1), asked, minimum)
    }

    /// The longest `Retry-After` honoured, in seconds: a day.
    public static let longestRetryAfter: Double = 86_400

    /// ``delay(attempt:retryAfter:unit:)`` with a draw from the system generator.
    public func delay(attempt: Int, retryAfter: Double?) -> Double {
        delay(attempt: attempt, retryAfter: retryAfter, unit: Double.random(in: 0...1))
    }
}
