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

    /// The set's numbers, `*` being `largest`, less `sortedUIDs` (ascending), as ascending disjoint ranges: work in
    /// proportion to the ranges and the UIDs, never to the numbers the ranges span.
    package func subtracting<UIDs: RandomAccessCollection<UInt32>>(
        sortedUIDs: UIDs, largest: UInt32
    ) -> [ClosedRange<UInt32>] where UIDs.Index == Int {
        guard largest > 0 else { return [] }
        // The set's own ranges, sorted and merged.
        var ranges = parts.map { part -> ClosedRange<UInt32> in
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
        ranges = merged
        var result: [ClosedRange<UInt32>] = []
        var index = 0
        for range in ranges {
            var start = range.lowerBound
            while index < sortedUIDs.count, sortedUIDs[index] < start { index += 1 }
            while index < sortedUIDs.count, sortedUIDs[index] <= range.upperBound {
                let uid = sortedUIDs[index]
                if uid > start { result.append(start...(uid - 1)) }
                if uid == .max { return result }
                start = uid + 1
                index += 1
            }
            if start <= range.upperBound { result.append(start...range.upperBound) }
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
