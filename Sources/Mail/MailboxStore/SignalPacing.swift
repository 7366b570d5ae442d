/// How often one device may be signalled: a token bucket per device, kept in its `devices` row so it holds across
/// restarts.
///
/// A device holds up to ``burst`` tokens and gets ``refillPerSecond`` back each second. A change is signalled at
/// once while the device has a token; once they run out, changes wait in the device's one outbox row (each newer
/// state replacing the last) and the newest goes out when a token returns. A quiet device therefore gets every
/// change's signal without delay, and a busy one at most `burst + refillPerSecond × seconds` signals.
///
/// The defaults follow the push services' guidance for collapsible notifications. Apple names no rate for alert
/// pushes but warns that excessive ones are throttled, and limits background pushes to a few per hour (the
/// dispatcher's background budget covers those). FCM allows a burst of 20 collapsible messages per device and at
/// most 240 messages a minute and 5,000 an hour to one device. So: a burst of 20 and one token a second, which is
/// 3,600 an hour at the most.
public struct SignalPacing: Sendable, Equatable {
    /// Tokens a device that has been quiet holds: signals it may get back to back.
    public var burst: Double
    /// Tokens returned each second.
    public var refillPerSecond: Double

    /// A bucket of `burst` tokens refilled at `refillPerSecond` (both must be positive; `burst` at least 1).
    public init(burst: Double, refillPerSecond: Double) {
        precondition(burst >= 1 && refillPerSecond > 0, "a bucket needs a token to give and a refill")
        self.burst = burst
        self.refillPerSecond = refillPerSecond
    }

    /// 20 back to back, then one a second.
    public static let standard = SignalPacing(burst: 20, refillPerSecond: 1)

    /// The device's tokens at `now`, from what its row holds: `stored` tokens (`nil`: never signalled, a full
    /// bucket) counted at `storedAt`.
    public func tokens(stored: Double?, at storedAt: Double, now: Double) -> Double {
        guard let stored else { return burst }
        return min(burst, stored + max(0, now - storedAt) * refillPerSecond)
    }

    /// When a change for a device holding `tokens` can be signalled: now while a token is left, otherwise when
    /// the next one has come back.
    public func dueTime(tokens: Double, now: Double) -> Double {
        tokens >= 1 ? now : now + (1 - tokens) / refillPerSecond
    }

    /// The tokens left after a signal was sent.
    public func spending(_ tokens: Double) -> Double { max(0, tokens - 1) }
}
