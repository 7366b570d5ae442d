import Foundation

/// A JSON value of any shape, read by a strict one-pass reader and written in key order: JMAP's method arguments
/// (RFC 8620 §3.2, where a result reference may put any value anywhere) and the simulators' request bodies.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// The deepest nesting a value may have: requests are a few levels deep, and a parser walking a hostile depth
    /// recursively would run out of stack.
    public static let maximumDepth = 64

    /// Parses UTF-8 JSON text (RFC 8259); `nil` when it is not JSON or nests deeper than ``maximumDepth``.
    public static func parse(_ data: Data) -> JSONValue? {
        JSONReader.read(Array(data), maximumDepth: maximumDepth)
    }

    /// Parses JSON text given as UTF-8 bytes, as the `Data` form does, without copying them first.
    public static func parse(_ bytes: [UInt8]) -> JSONValue? {
        JSONReader.read(bytes, maximumDepth: maximumDepth)
    }

    /// Parses JSON text (RFC 8259); `nil` when it is not JSON or nests deeper than ``maximumDepth``.
    public static func parse(_ text: String) -> JSONValue? {
        JSONReader.read(Array(text.utf8), maximumDepth: maximumDepth)
    }

    /// Compact JSON text, object members in key order (so the same value writes the same bytes).
    public var json: String { String(decoding: jsonBytes, as: UTF8.self) }

    /// ``json`` as UTF-8 bytes, written into one buffer.
    public var jsonBytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        write(to: &bytes)
        return bytes
    }

    /// JSON text for people to read: each member and element on a line of its own, indented by two spaces, object
    /// members in key order (the layout of a downloaded service-account file), ending without a newline.
    public var prettyJSON: String {
        var bytes: [UInt8] = []
        writePretty(to: &bytes, indent: 0)
        return String(decoding: bytes, as: UTF8.self)
    }

    private func writePretty(to out: inout [UInt8], indent: Int) {
        func newline(_ depth: Int) {
            out.append(UInt8(ascii: "\n"))
            out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: 2 * depth))
        }
        switch self {
        case .array(let values) where !values.isEmpty:
            out.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                newline(indent + 1)
                value.writePretty(to: &out, indent: indent + 1)
            }
            newline(indent)
            out.append(UInt8(ascii: "]"))
        case .object(let members) where !members.isEmpty:
            out.append(UInt8(ascii: "{"))
            for (index, member) in members.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                newline(indent + 1)
                JSONText.appendQuoted(member.key, to: &out)
                out.append(contentsOf: ": ".utf8)
                member.value.writePretty(to: &out, indent: indent + 1)
            }
            newline(indent)
            out.append(UInt8(ascii: "}"))
        default:
            write(to: &out)
        }
    }

    func write(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let value): out.append(contentsOf: (value ? "true" : "false").utf8)
        case .int(let value): out.append(contentsOf: String(value).utf8)
        case .double(let value): out.append(contentsOf: JSONText.number(value).utf8)
        case .string(let value): JSONText.appendQuoted(value, to: &out)
        case .array(let values):
            out.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                value.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (index, member) in members.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JSONText.appendQuoted(member.key, to: &out)
                out.append(UInt8(ascii: ":"))
                member.value.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    // MARK: Reading

    /// The members, when this is an object.
    public var object: [String: JSONValue]? {
        if case .object(let members) = self { return members }
        return nil
    }
    /// The elements, when this is an array.
    public var array: [JSONValue]? {
        if case .array(let values) = self { return values }
        return nil
    }
    /// The text, when this is a string.
    public var string: String? {
        if case .string(let text) = self { return text }
        return nil
    }
    /// The value, when this is a boolean.
    public var bool: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }
    /// The value, when this is an integer (a number without a fraction within Int64).
    public var int: Int64? {
        switch self {
        case .int(let value): return value
        case .double(let value) where value.rounded() == value && abs(value) < 9e15: return Int64(value)
        default: return nil
        }
    }
    /// Whether this is `null`.
    public var isNull: Bool { self == .null }

    /// The member `key` of an object (`nil` when absent or not an object).
    public subscript(key: String) -> JSONValue? { object?[key] }
}

extension JSONValue: Decodable {
    /// Decodes any JSON value.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    /// The value this literal writes.
    public init(stringLiteral value: String) { self = .string(value) }
    /// The value this literal writes.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// The value this literal writes.
    public init(integerLiteral value: Int64) { self = .int(value) }
    /// The value this literal writes.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// The value this literal writes.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    /// The value this literal writes.
    public init(nilLiteral: ()) { self = .null }
}

/// A strict reader of JSON text (RFC 8259) into ``JSONValue``, in one pass over the bytes: a request is read
/// without the cost of a failed decode per value, and nesting past the limit stops it before the stack can grow.
struct JSONReader {
    private let bytes: [UInt8]
    private let maximumDepth: Int
    private var index = 0

    private init(_ bytes: [UInt8], maximumDepth: Int) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
    }

    /// The value `bytes` hold, with nothing but white space around it; `nil` when they are not JSON or nest
    /// deeper than `maximumDepth` arrays and objects.
    static func read(_ bytes: [UInt8], maximumDepth: Int) -> JSONValue? {
        var reader = JSONReader(bytes, maximumDepth: maximumDepth)
        guard let value = reader.value(depth: 0) else { return nil }
        reader.skipWhitespace()
        // Not a ternary: there a `nil` would be read as the JSON `null` (JSONValue is ExpressibleByNilLiteral).
        guard reader.index == bytes.count else { return nil }
        return value
    }

    private var next: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipWhitespace() {
        while let byte = next, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { index += 1 }
    }

    /// The value at the cursor, `depth` arrays and objects in.
    private mutating func value(depth: Int) -> JSONValue? {
        skipWhitespace()
        if next == UInt8(ascii: "{") || next == UInt8(ascii: "[") {
            guard depth < maximumDepth else { return nil }
            return next == UInt8(ascii: "{") ? object(depth: depth) : array(depth: depth)
        }
        switch next {
        case UInt8(ascii: "\""): return string().map(JSONValue.string)
        case UInt8(ascii: "t"): return literal("true", .bool(true))
        case UInt8(ascii: "f"): return literal("false", .bool(false))
        case UInt8(ascii: "n"): return literal("null", .null)
        case .some: return number()
        case nil: return nil
        }
    }

    private mutating func literal(_ text: StaticString, _ value: JSONValue) -> JSONValue? {
        let count = text.utf8CodeUnitCount
        guard bytes.count - index >= count else { return nil }
        for offset in 0..<count where bytes[index + offset] != text.utf8Start[offset] { return nil }
        index += count
        return value
    }

    private mutating func object(depth: Int) -> JSONValue? {
        index += 1
        skipWhitespace()
        if next == UInt8(ascii: "}") {
            index += 1
            return .object([:])
        }
        // Members are gathered first, so the dictionary is made once at its size; a repeated key keeps its last value.
        var members: [(String, JSONValue)] = []
        while true {
            skipWhitespace()
            guard next == UInt8(ascii: "\""), let key = string() else { return nil }
            skipWhitespace()
            guard next == UInt8(ascii: ":") else { return nil }
            index += 1
            guard let member = value(depth: depth + 1) else { return nil }
            members.append((key, member))
            skipWhitespace()
            switch next {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return .object(Dictionary(members, uniquingKeysWith: { _, last in last }))
            default: return nil
            }
        }
    }

    private mutating func array(depth: Int) -> JSONValue? {
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if next == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            guard let element = value(depth: depth + 1) else { return nil }
            elements.append(element)
            skipWhitespace()
            switch next {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return .array(elements)
            default: return nil
            }
        }
    }

    /// A string at the cursor (its opening quote): escapes undone; `nil` for a control character, a bad escape, a
    /// lone surrogate or bytes that are not UTF-8.
    private mutating func string() -> String? {
        index += 1
        let start = index
        // The common case, a string without escapes, is made from the bytes where they lie; ASCII needs no check.
        var ascii = true
        while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\"),
            bytes[index] >= 0x20
        {
            ascii = ascii && bytes[index] < 0x80
            index += 1
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
            let end = index
            index += 1
            guard ascii else { return String(validating: bytes[start..<end], as: UTF8.self) }
            return bytes.withUnsafeBufferPointer {
                String(decoding: UnsafeBufferPointer(rebasing: $0[start..<end]), as: UTF8.self)
            }
        }
        var text = Array(bytes[start..<index])
        while let byte = next {
            index += 1
            switch byte {
            case UInt8(ascii: "\""): return String(validating: text, as: UTF8.self)
            case ..<0x20: return nil
            case UInt8(ascii: "\\"):
                guard let escape = next else { return nil }
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): text.append(escape)
                case UInt8(ascii: "b"): text.append(0x08)
                case UInt8(ascii: "f"): text.append(0x0C)
                case UInt8(ascii: "n"): text.append(0x0A)
                case UInt8(ascii: "r"): text.append(0x0D)
                case UInt8(ascii: "t"): text.append(0x09)
                case UInt8(ascii: "u"):
                    guard let scalar = unicodeEscape() else { return nil }
                    text.append(contentsOf: String(Character(scalar)).utf8)
                default: return nil
                }
            default: text.append(byte)
            }
        }
        return nil
    }

    /// The scalar of a `\uXXXX` escape (the cursor after its `u`), a surrogate pair read as one.
    private mutating func unicodeEscape() -> Unicode.Scalar? {
        guard let unit = hex4() else { return nil }
        switch unit {
        case 0xD800...0xDBFF:
            guard next == UInt8(ascii: "\\"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u") else {
                return nil
            }
            index += 2
            guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
            return Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
        case 0xDC00...0xDFFF: return nil
        default: return Unicode.Scalar(unit)
        }
    }

    private mutating func hex4() -> UInt32? {
        guard bytes.count - index >= 4 else { return nil }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    /// A number at the cursor: an integer within Int64 as `.int`, anything else finite as `.double`.
    private mutating func number() -> JSONValue? {
        let start = index
        func digits() -> Bool {
            let first = index
            while let byte = next, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { index += 1 }
            return index > first
        }
        if next == UInt8(ascii: "-") { index += 1 }
        if next == UInt8(ascii: "0") {
            index += 1
        } else {
            guard digits() else { return nil }
        }
        var isInteger = true
        if next == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard digits() else { return nil }
        }
        if next == UInt8(ascii: "e") || next == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if next == UInt8(ascii: "+") || next == UInt8(ascii: "-") { index += 1 }
            guard digits() else { return nil }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger, let value = Int64(text) { return .int(value) }
        guard let value = Double(text), value.isFinite else { return nil }
        return .double(value)
    }
}
