extension Duration {
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
