import Foundation

/// A value stored in or read from a database.
public enum SQLValue: Sendable, Hashable {
    /// SQL `NULL`.
    case null
    /// A 64-bit integer.
    case integer(Int64)
    /// A double.
    case real(Double)
    /// UTF-8 text.
    case text(String)
    /// Raw bytes.
    case blob([UInt8])

    /// The value as an integer, when it is one.
    public var int64: Int64? {
        if case .integer(let v) = self { return v }
        return nil
    }
    /// The value as an `Int`, when it is an integer.
    public var int: Int? { int64.map { Int($0) } }
    /// The value as a double (integers convert).
    public var double: Double? {
        switch self {
        case .real(let v): return v
        case .integer(let v): return Double(v)
        default: return nil
        }
    }
    /// The value as text, when it is text.
    public var string: String? {
        if case .text(let v) = self { return v }
        return nil
    }
    /// The value as bytes, when it is a blob.
    public var bytes: [UInt8]? {
        if case .blob(let v) = self { return v }
        return nil
    }
    /// The value as a Boolean (non-zero integer), when it is an integer.
    public var bool: Bool? { int64.map { $0 != 0 } }
    /// Whether the value is `NULL`.
    public var isNull: Bool { self == .null }
}

/// A Swift value that can be bound to a statement parameter.
public protocol SQLBindable: Sendable {
    /// The database value this Swift value is stored as.
    var sqlValue: SQLValue { get }
}

extension SQLValue: SQLBindable {
    /// The value itself.
    public var sqlValue: SQLValue { self }
}
extension Int: SQLBindable {
    /// An integer.
    public var sqlValue: SQLValue { .integer(Int64(self)) }
}
extension Int64: SQLBindable {
    /// An integer.
    public var sqlValue: SQLValue { .integer(self) }
}
extension Int32: SQLBindable {
    /// An integer.
    public var sqlValue: SQLValue { .integer(Int64(self)) }
}
extension Bool: SQLBindable {
    /// 1 or 0.
    public var sqlValue: SQLValue { .integer(self ? 1 : 0) }
}
extension Double: SQLBindable {
    /// A real.
    public var sqlValue: SQLValue { .real(self) }
}
extension String: SQLBindable {
    /// Text.
    public var sqlValue: SQLValue { .text(self) }
}
extension Substring: SQLBindable {
    /// Text.
    public var sqlValue: SQLValue { .text(String(self)) }
}
extension Data: SQLBindable {
    /// A blob.
    public var sqlValue: SQLValue { .blob([UInt8](self)) }
}
extension Array: SQLBindable where Element == UInt8 {
    /// A blob.
    public var sqlValue: SQLValue { .blob(self) }
}
extension Optional: SQLBindable where Wrapped: SQLBindable {
    /// The wrapped value, or `NULL`.
    public var sqlValue: SQLValue { self?.sqlValue ?? .null }
}
