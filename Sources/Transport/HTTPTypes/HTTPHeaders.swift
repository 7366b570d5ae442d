/// An ordered list of HTTP header fields with case-insensitive lookup by name, for both ends: the requests
/// HTTPServer hands its handlers and the responses they return, and what HTTPClient sends and receives.
///
/// Fields keep the order they were added in, and a name may appear more than once. `description` lists field
/// names only, so a header list can be logged without leaking authorization values.
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    private var fields: [HTTPField]

    /// Creates a header list from `(name, value)` pairs, keeping their order.
    public init(_ pairs: [(String, String)] = []) { fields = pairs.map { HTTPField(name: $0.0, value: $0.1) } }

    /// Creates a header list from a literal such as `["Content-Type": "application/json"]`; its order is kept.
    public init(dictionaryLiteral elements: (String, String)...) { self.init(elements) }

    /// The number of fields, counting repeated names separately.
    public var count: Int { fields.count }

    /// Whether the list holds no field.
    public var isEmpty: Bool { fields.isEmpty }

    /// The value of the first field named `name` (case-insensitive); setting replaces every field of that name
    /// (``replaceOrAdd(name:value:)``), `nil` removes them.
    public subscript(name: String) -> String? {
        get { fields.first { Self.same($0.name, name) }?.value }
        set {
            if let newValue { replaceOrAdd(name: name, value: newValue) } else { remove(name: name) }
        }
    }

    /// Every value of the fields named `name` (case-insensitive), in order.
    public func values(for name: String) -> [String] {
        fields.filter { Self.same($0.name, name) }.map(\.value)
    }

    /// Whether a field named `name` (case-insensitive) is present.
    public func contains(_ name: String) -> Bool { fields.contains { Self.same($0.name, name) } }

    /// Appends a field, keeping existing fields of the same name.
    public mutating func add(name: String, value: String) { fields.append(HTTPField(name: name, value: value)) }

    /// Replaces every field named `name` with one field holding `value`, where the first of them was (or at the
    /// end when there was none).
    public mutating func replaceOrAdd(name: String, value: String) {
        guard let index = fields.firstIndex(where: { Self.same($0.name, name) }) else {
            add(name: name, value: value)
            return
        }
        fields[index].value = value
        let tail = fields[(index + 1)...].filter { !Self.same($0.name, name) }
        fields.replaceSubrange((index + 1)..., with: tail)
    }

    /// Removes every field named `name` (case-insensitive).
    public mutating func remove(name: String) { fields.removeAll { Self.same($0.name, name) } }

    /// Iterates over the fields in order.
    public func makeIterator() -> IndexingIterator<[HTTPField]> { fields.makeIterator() }

    /// The field names, in order; values are left out on purpose.
    public var description: String { "HTTPHeaders(" + fields.map(\.name).joined(separator: ", ") + ")" }

    /// Two lists are equal when they hold the same fields in the same order (names compared case-insensitively).
    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.count == rhs.fields.count
            && zip(lhs.fields, rhs.fields).allSatisfy { same($0.name, $1.name) && $0.value == $1.value }
    }

    private static func same(_ lhs: String, _ rhs: String) -> Bool { namesMatch(lhs, rhs) }

    /// Whether two field names are the same name: equal but for the case of ASCII letters (field names are tokens,
    /// RFC 9110 §5.1), compared without a lowercased copy of either.
    public static func namesMatch(_ lhs: String, _ rhs: String) -> Bool {
        guard lhs.utf8.count == rhs.utf8.count else { return false }
        return zip(lhs.utf8, rhs.utf8).allSatisfy { left, right in
            left == right
                || (left | 0x20 == right | 0x20 && (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(left | 0x20))
        }
    }
}
