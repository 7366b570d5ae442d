/// JSON text written by hand, where a body's bytes are fixed by a contract (a JWT, an FCM message, a capture-log
/// line) or written for every event: no encoder is made for one string.
public enum JSONText {
    /// `text` as a JSON string literal: quotes and backslashes escaped, `\n`, `\r` and `\t` as such, other control
    /// characters as `\u00XX`; everything else as it is (UTF-8). Text with none of those is only put in quotes.
    public static func quoted(_ text: String) -> String {
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) {
            return "\"" + text + "\""
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count + 8)
        appendQuoted(text, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension JSONText {
    /// Appends `text` as a JSON string literal to `out` (the escapes ``quoted(_:)`` describes), without a `String`
    /// made for each value (a writer of many values into one buffer).
    public static func appendQuoted(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        let done: Void? = text.utf8.withContiguousStorageIfAvailable { appendEscaped($0, to: &out) }
        if done == nil { appendEscaped(Array(text.utf8), to: &out) }
        out.append(UInt8(ascii: "\""))
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// `bytes` (UTF-8) with the escapes ``quoted(_:)`` describes, runs without one copied whole.
    private static func appendEscaped(_ bytes: some RandomAccessCollection<UInt8>, to out: inout [UInt8]) {
        var runStart = bytes.startIndex
        var index = bytes.startIndex
        while index != bytes.endIndex {
            let byte = bytes[index]
            if byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") {
                index = bytes.index(after: index)
                continue
            }
            out.append(contentsOf: bytes[runStart..<index])
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
            case UInt8(ascii: "\n"): out.append(contentsOf: #"\n"#.utf8)
            case UInt8(ascii: "\r"): out.append(contentsOf: #"\r"#.utf8)
            case UInt8(ascii: "\t"): out.append(contentsOf: #"\t"#.utf8)
            default:
                out.append(contentsOf: #"\u00"#.utf8)
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0xF)])
            }
            index = bytes.index(after: index)
            runStart = index
        }
        out.append(contentsOf: bytes[runStart..<index])
    }

    /// `value` as a JSON number: an integral value without a fraction (`1733000000`, as JSONEncoder writes it),
    /// any other in Swift's shortest form that reads back as the same `Double`; `null` for a value JSON cannot hold.
    public static func number(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        if value == value.rounded(.towardZero), abs(value) < 1e15 { return String(Int64(value)) }
        return value.description
    }

    /// Values already written as JSON, as one array.
    public static func array(_ elements: some Sequence<String>) -> String {
        "[" + elements.joined(separator: ",") + "]"
    }
}

/// A value that writes itself as JSON text (``JSONObjectText`` usually), so a list of them is one JSON array.
public protocol JSONTextRepresentable {
    /// The value as JSON text.
    var json: String { get }
}

extension Sequence where Element: JSONTextRepresentable {
    /// The elements as one JSON array. (A closure, not a key path: a key path in this generic context is built at
    /// run time on every call, which the delivery profile showed as 6 % of the writer's time.)
    public var json: String {
        var text = "["
        var first = true
        for element in self {
            if !first { text += "," }
            first = false
            text += element.json
        }
        return text + "]"
    }
}

/// A JSON object written member by member, in the order they are added, for a body written on every request:
/// what Codable's synthesized encoding gives (a nil optional left out), without an encoder and its boxes.
public struct JSONObjectText: Sendable {
    /// The object so far, without its closing brace: bytes, not a `String`, so a member is appended without a
    /// string made for its quoted key or value.
    private var bytes: [UInt8]
    private var isEmpty = true

    /// An empty object.
    public init() {
        bytes = [UInt8(ascii: "{")]
        bytes.reserveCapacity(256)
    }

    /// The object as JSON text.
    public var json: String {
        String(unsafeUninitializedCapacity: bytes.count + 1) { buffer in
            let written = buffer.initialize(fromContentsOf: bytes)
            buffer[written] = UInt8(ascii: "}")
            return written + 1
        }
    }

    private mutating func key(_ key: String) {
        if !isEmpty { bytes.append(UInt8(ascii: ",")) }
        isEmpty = false
        JSONText.appendQuoted(key, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    /// A string member; left out when `value` is nil.
    public mutating func add(_ key: String, _ value: String?) {
        guard let value else { return }
        self.key(key)
        JSONText.appendQuoted(value, to: &bytes)
    }

    /// A number member; left out when `value` is nil.
    public mutating func add(_ key: String, _ value: Double?) {
        guard let value else { return }
        self.key(key)
        bytes.append(contentsOf: JSONText.number(value).utf8)
    }

    /// An integer member.
    public mutating func add(_ key: String, _ value: Int) {
        self.key(key)
        bytes.append(contentsOf: String(value).utf8)
    }

    /// An integer member.
    public mutating func add(_ key: String, _ value: Int64) {
        self.key(key)
        bytes.append(contentsOf: String(value).utf8)
    }

    /// An array of strings.
    public mutating func add(_ key: String, _ values: [String]) {
        self.key(key)
        bytes.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            JSONText.appendQuoted(value, to: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// An array of numbers.
    public mutating func add(_ key: String, _ values: [Double]) {
        add(key, json: JSONText.array(values.lazy.map(JSONText.number)))
    }

    /// A `true` or `false` member.
    public mutating func add(_ key: String, _ value: Bool) {
        self.key(key)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    /// A member whose value is already JSON text (an array or object written by hand).
    public mutating func add(_ key: String, json: String) {
        self.key(key)
        bytes.append(contentsOf: json.utf8)
    }
}
