import Foundation
import Locking

/// The source of "now" for the gateway: expirations, token ages, background budgets and log times.
///
/// The simulator runs on ``SystemClock``; tests inject a ``ManualClock`` and move time themselves.
public protocol SimulatorClock: Sendable {
    /// The current time.
    func now() -> Date
}

/// `date` as whole milliseconds since 1970 (rounded down): how every simulator's logs and answers write a time.
public func millisecondsSince1970(_ date: Date) -> Int64 {
    Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
}

/// The wall clock.
public struct SystemClock: SimulatorClock {
    /// Creates the wall clock.
    public init() {}

    /// The current wall-clock time.
    public func now() -> Date { Date() }
}

/// A clock that only moves when told to, for tests.
public final class ManualClock: SimulatorClock {
    private let current: LockedValue<Date>

    /// Creates a clock showing `start` (the wall clock's time by default).
    public init(start: Date = Date()) {
        current = LockedValue(start)
    }

    /// The time the clock shows.
    public func now() -> Date { current.withLock { $0 } }

    /// Moves the clock forward by `seconds`.
    public func advance(by seconds: TimeInterval) {
        current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }

    /// Sets the clock to `date`.
    public func set(_ date: Date) {
        current.withLock { $0 = date }
    }
}
