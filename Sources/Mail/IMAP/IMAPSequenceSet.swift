/// A sequence set (`1:4,7,9:*`) of message sequence numbers or UIDs (RFC 9051 section 9, `sequence-set`).
package struct IMAPSequenceSet: Equatable, Sendable {
    private struct Part: Equatable, Sendable {
        var lower: UInt32?
        var upper: UInt32?
    }

    private var parts: [Part]

    /// Parses the set; `nil` when it is not one (or `$`, which is not supported).
    package init?(_ text: String) {
        var parts: [Part] = []
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let ends = item.split(separator: ":", omittingEmptySubsequences: false)
            guard (1...2).contains(ends.count) else { return nil }
            var values: [UInt32?] = []
            for end in ends {
                if end == "*" {
                    values.append(nil)
                } else {
                    guard let number = UInt32(end), number > 0, end.allSatisfy(\.isASCII) else { return nil }
                    values.append(number)
                }
            }
            parts.append(Part(lower: values[0], upper: values.count == 2 ? values[1] : values[0]))
        }
        guard !parts.isEmpty else { return nil }
        self.parts = parts
    }

    /// The largest number written in the set (`*` aside), if any.
    var largestNumber: UInt32? { parts.flatMap { [$0.lower, $0.upper] }.compactMap { $0 }.max() }

    /// Whether `number` is in the set when `*` means `largest`.
    package func contains(_ number: UInt32, largest: UInt32) -> Bool {
        parts.contains { part in
            let a = part.lower ?? largest
            let b = part.upper ?? largest
            return (min(a, b)...max(a, b)).contains(number)
        }
    }

    /// The set's numbers, `*` being `largest`, less the `count` ascending, distinct UIDs `uid(0)`, `uid(1)`, …, as
    /// ascending disjoint ranges: work in proportion to the ranges and the gaps between the UIDs (each found by
    /// halving: a run of UIDs with no gap is seen as one from its ends), never to the UIDs or to the numbers the
    /// ranges span. So VANISHED for a client that names no known UIDs costs a 200,000-message mailbox about what it
    /// costs a small one.
    package func subtracting(count: Int, largest: UInt32, uid: (Int) -> UInt32) -> [ClosedRange<UInt32>] {
        guard largest > 0 else { return [] }
        // The set's own ranges, sorted and merged.
        let ranges = parts.map { part -> ClosedRange<UInt32> in
            let a = min(part.lower ?? largest, largest)
            let b = min(part.upper ?? largest, largest)
            return min(a, b)...max(a, b)
        }.sorted { $0.lowerBound < $1.lowerBound }
        var merged: [ClosedRange<UInt32>] = []
        for range in ranges {
            if let last = merged.last, range.lowerBound <= last.upperBound &+ 1, last.upperBound != .max {
                merged[merged.count - 1] = last.lowerBound...max(last.upperBound, range.upperBound)
            } else {
                merged.append(range)
            }
        }
        /// The first index whose UID is at least `value` (`count` when none is).
        func firstIndex(atLeast value: UInt32) -> Int {
            var (low, high) = (0, count)
            while low < high {
                let middle = (low + high) / 2
                if uid(middle) < value { low = middle + 1 } else { high = middle }
            }
            return low
        }
        var result: [ClosedRange<UInt32>] = []
        /// The gaps between the UIDs at indices `low` … `high`, ascending.
        func gaps(_ low: Int, _ high: Int) {
            let (first, last) = (uid(low), uid(high))
            guard Int(last) - Int(first) != high - low else { return }  // as many UIDs as numbers: no gap
            if high - low == 1 {
                result.append((first + 1)...(last - 1))
                return
            }
            let middle = (low + high) / 2
            gaps(low, middle)
            gaps(middle, high)
        }
        for range in merged {
            let start = firstIndex(atLeast: range.lowerBound)
            let end =
                range.upperBound == .max ? count : firstIndex(atLeast: range.upperBound + 1)  // UIDs in the range
            guard start < end else {
                result.append(range)
                continue
            }
            if uid(start) > range.lowerBound { result.append(range.lowerBound...(uid(start) - 1)) }
            gaps(start, end - 1)
            if uid(end - 1) < range.upperBound { result.append((uid(end - 1) + 1)...range.upperBound) }
        }
        return result
    }

    /// Ascending disjoint ranges written as a set.
    package static func write(ranges: [ClosedRange<UInt32>]) -> String {
        ranges.map { $0.count == 1 ? "\($0.lowerBound)" : "\($0.lowerBound):\($0.upperBound)" }.joined(
            separator: ",")
    }

    /// The set written back (RFC 9051 form).
    package static func write(_ numbers: [UInt32]) -> String {
        var output: [String] = []
        var index = 0
        let sorted = numbers.sorted()
        while index < sorted.count {
            var end = index
            while end + 1 < sorted.count, sorted[end + 1] == sorted[end] + 1 { end += 1 }
            output.append(end == index ? "\(sorted[index])" : "\(sorted[index]):\(sorted[end])")
            index = end + 1
        }
        return output.joined(separator: ",")
    }
}
