import Dispatch
import Foundation
import Locking

/// The source of the wall-clock time ("now") for every part that reads it: expirations, token ages, due times,
/// leases and log times.
///
/// Production runs on ``SystemClock``; tests inject a ``ManualClock`` and move time themselves.
public protocol WallClock: Sendable {
    /// The current time.
    func now() -> Date
}

extension WallClock {
    /// The current time in (fractional) seconds since 1970.
    public var secondsSince1970: Double { now().timeIntervalSince1970 }
}

/// The system's wall clock.
public struct SystemClock: WallClock {
    /// Creates the system's wall clock.
    public init() {}

    /// The current wall-clock time.
    public func now() -> Date { Date() }
}

/// A clock that only moves when told to, for tests.
public final class ManualClock: WallClock {
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

/// The monotonic clock every event loop, timer and rate limit reads: it never jumps when the wall clock is set.
public enum MonotonicTime {
    /// Nanoseconds since an arbitrary fixed point (the system's boot).
    public static func nanoseconds() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
}
