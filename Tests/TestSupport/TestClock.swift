import Locking

/// A clock the test moves by hand: seconds since 1970, starting in 2027.
public final class TestClock: Sendable {
    private let value = LockedValue<Double>(1_800_000_000)

    /// A clock at its start.
    public init() {}

    /// The time now.
    public var now: Double { value.withLock { $0 } }

    /// Moves the clock forward.
    public func advance(_ seconds: Double) { value.withLock { $0 += seconds } }
}
