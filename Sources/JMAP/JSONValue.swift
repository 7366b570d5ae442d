import Foundation
import JSONText

/// A JSON value of any shape: what JMAP's method arguments are (RFC 8620 §3.2), since a result reference may put
/// any value anywhere.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// The deepest nesting a request may have: JMAP's arguments are a few levels deep, and a parser walking a
    /// hostile depth recursively would run out of stack.
    public static let maximumDepth = 64

    /// Parses UTF-8 JSON text; `nil` when it is not JSON or nests deeper than ``maximumDepth``.
    public static func parse(_ data: Data) -> JSONValue? {
        guard depth(of: data) <= maximumDepth else { return nil }
        return try? JSONDecoder().decode(JSONValue.self, from: data)
    }

    /// The deepest nesting of arrays and objects in `data`, brackets inside strings not counted.
    static func depth(of data: Data) -> Int {
        var depth = 0
        var deepest = 0
        var inString = false
        var escaped = false
        for byte in data {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                deepest = max(deepest, depth)
            case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
            default: break
            }
        }
        return deepest
    }

    /// Compact JSON text, object members in key order (so the same value writes the same bytes).
    public var json: String {
        var text = ""
        write(to: &text)
        return text
    }

    func write(to text: inout String) {
        switch self {
        case .null: text += "null"
        case .bool(let value): text += value ? "true" : "false"
        case .int(let value): text += String(value)
        case .double(let value): text += JSONText.number(value)
        case .string(let value): text += JSONText.quoted(value)
        case .array(let values):
            text += "["
            for (index, value) in values.enumerated() {
                if index > 0 { text += "," }
                value.write(to: &text)
            }
            text += "]"
        case .object(let members):
            text += "{"
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { text += "," }
                text += JSONText.quoted(key)
                text += ":"
                members[key]!.write(to: &text)
            }
            text += "}"
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

extension JSONValue {
    /// A string, or `null` for `nil`.
    static func string(_ text: String?) -> JSONValue { text.map(JSONValue.string) ?? .null }
    /// An integer from an `Int`.
    static func int(_ value: Int) -> JSONValue { .int(Int64(value)) }
    /// A list of strings.
    static func strings(_ texts: [String]) -> JSONValue { .array(texts.map(JSONValue.string)) }
}

/// RFC 6901 JSON Pointers with JMAP's `*` (RFC 8620 §3.7): at an array, `*` applies the rest of the pointer to each
/// element and flattens arrays of results into one.
enum JSONPointer {
    /// The value `pointer` names in `value`, or `nil` when it names nothing.
    static func evaluate(_ pointer: String, in value: JSONValue) -> JSONValue? {
        if pointer.isEmpty { return value }
        guard pointer.hasPrefix("/") else { return nil }
        let tokens = pointer.dropFirst().split(separator: "/", omittingEmptySubsequences: false).map {
            $0.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
        }
        return evaluate(tokens[...], in: value)
    }

    private static func evaluate(_ tokens: ArraySlice<String>, in value: JSONValue) -> JSONValue? {
        guard let token = tokens.first else { return value }
        let rest = tokens.dropFirst()
        switch value {
        case .object(let members):
            guard let member = members[token] else { return nil }
            return evaluate(rest, in: member)
        case .array(let elements):
            if token == "*" {
                var results: [JSONValue] = []
                for element in elements {
                    guard let result = evaluate(rest, in: element) else { return nil }
                    if case .array(let inner) = result { results += inner } else { results.append(result) }
                }
                return .array(results)
            }
            guard token == "0" || (token.first != "0" && token.allSatisfy(\.isASCII) && token.allSatisfy(\.isNumber)),
                let index = Int(token), index < elements.count
            else { return nil }
            return evaluate(rest, in: elements[index])
        default:
            return nil
        }
    }
}
