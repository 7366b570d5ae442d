import Foundation

/// Whether a payload is a JSON object, and whether its `aps.content-available` is 1 (the rule for
/// background pushes).
///
/// `JSONSerialization` decides every payload; a byte-level scan answers first for plain documents
/// (printable ASCII strings without escapes, small integers, `true`/`false`/`null`, no repeated key,
/// shallow nesting) and gives every other payload to `JSONSerialization`. The scan only ever accepts
/// documents `JSONSerialization` accepts too, so both give the same answers.
package enum PayloadCheck {
    package enum Verdict: Equatable {
        /// Not JSON, or JSON that is not an object.
        case notAnObject
        /// A JSON object; `contentAvailableIsOne` is `nil` when the scan left it undecided.
        case object(contentAvailableIsOne: Bool?)
    }

    /// The verdict for `body`, from the scan when it can decide, else from `JSONSerialization`.
    package static func check(_ body: Data, needsContentAvailable: Bool) -> Verdict {
        if let verdict = scan(body), !needsContentAvailable || verdict != .object(contentAvailableIsOne: nil) {
            return verdict
        }
        return foundationCheck(body)
    }

    /// The reference answer: `JSONSerialization` and the bridged types it returns.
    package static func foundationCheck(_ body: Data) -> Verdict {
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else {
            return .notAnObject
        }
        let aps = object["aps"] as? [String: Any]
        let available = aps?["content-available"] as? NSNumber
        return .object(contentAvailableIsOne: available?.intValue == 1)
    }

    /// The byte-level scan: `.object` for a plain JSON object, `nil` for anything it does not decide
    /// (invalid JSON included: `JSONSerialization` names the verdict for those).
    package static func scan(_ body: Data) -> Verdict? {
        body.withUnsafeBytes { raw -> Verdict? in
            guard let base = raw.baseAddress, !raw.isEmpty else { return nil }
            let bytes = UnsafeBufferPointer(start: base.assumingMemoryBound(to: UInt8.self), count: raw.count)
            var scanner = Scanner(bytes: bytes)
            return scanner.document()
        }
    }

    /// What the scan found at `aps.content-available`.
    private enum ContentAvailable {
        /// No `aps` object, or no such key in it.
        case absent
        /// An integer literal of at most 15 digits.
        case integer(Int)
        /// Any other value (left to `JSONSerialization`).
        case other
    }

    private struct Scanner {
        static let maxDepth = 32
        static let maxKeysPerObject = 32

        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0
        /// Start and length of the keys of every open object, innermost last.
        var keys: [(start: Int, count: Int)] = []
        var contentAvailable = ContentAvailable.absent

        init(bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
            keys.reserveCapacity(16)
        }

        mutating func document() -> Verdict? {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "{") else { return nil }
            guard object(depth: 1, role: .top) else { return nil }
            skipWhitespace()
            guard index == bytes.count else { return nil }
            switch contentAvailable {
            case .absent: return .object(contentAvailableIsOne: false)
            case .integer(let value): return .object(contentAvailableIsOne: value == 1)
            case .other: return .object(contentAvailableIsOne: nil)
            }
        }

        /// Where an object sits: the document itself, the top-level `aps` value, or elsewhere.
        enum Role {
            case top
            case aps
            case other
        }

        mutating func skipWhitespace() {
            while index < bytes.count {
                let byte = bytes[index]
                guard byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 else { return }
                index += 1
            }
        }

        /// Parses the object at `index` (which holds `{`).
        mutating func object(depth: Int, role: Role) -> Bool {
            guard depth <= Self.maxDepth else { return false }
            index += 1
            let firstKey = keys.count
            defer { keys.removeSubrange(firstKey...) }
            skipWhitespace()
            guard index < bytes.count else { return false }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return true
            }
            while true {
                skipWhitespace()
                guard let key = string() else { return false }
                guard keys.count - firstKey < Self.maxKeysPerObject else { return false }
                for earlier in keys[firstKey...] where equal(earlier.start, earlier.count, key.start, key.count) {
                    return false  // a repeated key: left to JSONSerialization
                }
                keys.append(key)
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return false }
                index += 1
                skipWhitespace()
                let childRole: Role
                var watched = false
                switch role {
                case .top where matches(key, "aps"): childRole = .aps
                case .aps where matches(key, "content-available"):
                    childRole = .other
                    watched = true
                default: childRole = .other
                }
                let valueStart = index
                guard value(depth: depth, role: childRole) else { return false }
                if watched { contentAvailable = integerValue(from: valueStart, to: index) }
                skipWhitespace()
                guard index < bytes.count else { return false }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard bytes[index] == UInt8(ascii: "}") else { return false }
                index += 1
                return true
            }
        }

        mutating func array(depth: Int) -> Bool {
            guard depth <= Self.maxDepth else { return false }
            index += 1
            skipWhitespace()
            guard index < bytes.count else { return false }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return true
            }
            while true {
                skipWhitespace()
                guard value(depth: depth, role: .other) else { return false }
                skipWhitespace()
                guard index < bytes.count else { return false }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                guard bytes[index] == UInt8(ascii: "]") else { return false }
                index += 1
                return true
            }
        }

        /// One value at `index` (whitespace already skipped), inside a container at `depth`.
        mutating func value(depth: Int, role: Role) -> Bool {
            guard index < bytes.count else { return false }
            switch bytes[index] {
            case UInt8(ascii: "{"): return object(depth: depth + 1, role: role)
            case UInt8(ascii: "["): return array(depth: depth + 1)
            case UInt8(ascii: "\""): return string() != nil
            case UInt8(ascii: "t"): return literal("true")
            case UInt8(ascii: "f"): return literal("false")
            case UInt8(ascii: "n"): return literal("null")
            default: return number()
            }
        }

        /// A string of printable ASCII without escapes; returns the range of its contents.
        mutating func string() -> (start: Int, count: Int)? {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
            index += 1
            let start = index
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    index += 1
                    return (start, index - 1 - start)
                }
                guard byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\\") else { return nil }
                index += 1
            }
            return nil
        }

        mutating func literal(_ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard bytes.count - index >= count else { return false }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
            index += count
            return true
        }

        /// An integer `-?(0|[1-9][0-9]*)` of at most 15 digits.
        mutating func number() -> Bool {
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
            let start = index
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 { index += 1 }
            let digits = index - start
            guard digits >= 1, digits <= 15, !(digits > 1 && bytes[start] == 0x30) else { return false }
            // A fraction or an exponent follows: left to JSONSerialization.
            if index < bytes.count, [UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E")].contains(bytes[index]) {
                return false
            }
            return true
        }

        func integerValue(from start: Int, to end: Int) -> ContentAvailable {
            var position = start
            var negative = false
            if bytes[position] == UInt8(ascii: "-") {
                negative = true
                position += 1
            }
            guard position < end else { return .other }
            var value = 0
            while position < end {
                let byte = bytes[position]
                guard byte >= 0x30, byte <= 0x39 else { return .other }
                value = value * 10 + Int(byte - 0x30)
                position += 1
            }
            return .integer(negative ? -value : value)
        }

        func matches(_ key: (start: Int, count: Int), _ text: StaticString) -> Bool {
            guard key.count == text.utf8CodeUnitCount else { return false }
            for offset in 0..<key.count where bytes[key.start + offset] != text.utf8Start[offset] { return false }
            return true
        }

        func equal(_ first: Int, _ firstCount: Int, _ second: Int, _ secondCount: Int) -> Bool {
            guard firstCount == secondCount else { return false }
            for offset in 0..<firstCount where bytes[first + offset] != bytes[second + offset] { return false }
            return true
        }
    }
}
