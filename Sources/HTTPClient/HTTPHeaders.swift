/// An ordered list of HTTP header fields with case-insensitive lookup by name.
///
/// Fields keep the order they were added in, and a name may appear more than once. `description` lists
/// field names only, so a header list can be logged without leaking authorization values.
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    /// One header field.
    public typealias Field = (name: String, value: String)

    private var storage: [Field]

    /// Creates a header list from ordered `(name, value)` pairs.
    public init(_ fields: [(String, String)] = []) {
        storage = fields.map { (name: $0.0, value: $0.1) }
    }

    /// Creates a header list from a literal; the literal's order is kept.
    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// The number of fields, counting repeated names separately.
    public var count: Int { storage.count }

    /// Whether the list holds no field.
    public var isEmpty: Bool { storage.isEmpty }

    /// The value of the first field named `name` (case-insensitive), or `nil`.
    public subscript(name: String) -> String? {
        storage.first { Self.sameName($0.name, name) }?.value
    }

    /// Every value of the fields named `name` (case-insensitive), in order.
    public func values(for name: String) -> [String] {
        storage.filter { Self.sameName($0.name, name) }.map(\.value)
    }

    /// Whether a field named `name` (case-insensitive) is present.
    public func contains(_ name: String) -> Bool {
        storage.contains { Self.sameName($0.name, name) }
    }

    /// Appends a field, keeping any existing field with the same name.
    public mutating func add(name: String, value: String) {
        storage.append((name: name, value: value))
    }

    /// Replaces every field named `name` with a single field holding `value`.
    public mutating func replaceOrAdd(name: String, value: String) {
        guard let index = storage.firstIndex(where: { Self.sameName($0.name, name) }) else {
            add(name: name, value: value)
            return
        }
        storage[index].value = value
        let tail = storage[(index + 1)...].filter { !Self.sameName($0.name, name) }
        storage.replaceSubrange((index + 1)..., with: tail)
    }

    /// Removes every field named `name` (case-insensitive).
    public mutating func remove(name: String) {
        storage.removeAll { Self.sameName($0.name, name) }
    }

    /// Iterates over the fields in order.
    public func makeIterator() -> IndexingIterator<[Field]> {
        storage.makeIterator()
    }

    /// The field names, in order; values are left out on purpose.
    public var description: String {
        "HTTPHeaders(" + storage.map(\.name).joined(separator: ", ") + ")"
    }

    /// Two lists are equal when they hold the same fields in the same order (names compared case-insensitively).
    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.storage.count == rhs.storage.count
            && zip(lhs.storage, rhs.storage).allSatisfy { sameName($0.name, $1.name) && $0.value == $1.value }
    }

    private static func sameName(_ lhs: String, _ rhs: String) -> Bool {
        lhs.utf8.count == rhs.utf8.count && lhs.lowercased() == rhs.lowercased()
    }
}
