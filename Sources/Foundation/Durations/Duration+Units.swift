/// A `Duration` in the units C APIs, metrics and logs take: written once, for every target.
extension Duration {
    /// The duration in (fractional) seconds.
    package var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// The duration in whole milliseconds, truncated toward zero.
    package var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        if overflow { return seconds < 0 ? .min : .max }
        return scaled.addingReportingOverflow(attoseconds / 1_000_000_000_000_000).partialValue
    }

    /// The duration in whole nanoseconds, clamped to `0...UInt64.max`.
    package var nanosecondsClamped: UInt64 {
        let (seconds, attoseconds) = components
        if seconds < 0 { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return UInt64.max }
        let (total, carry) = whole.addingReportingOverflow(UInt64(max(0, attoseconds) / 1_000_000_000))
        return carry ? UInt64.max : total
    }
}
