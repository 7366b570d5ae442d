/// One result row, with values by position and by column name.
public struct Row: Sendable, Equatable {
    /// The column names, in result order.
    public let columns: [String]
    /// The values, in result order.
    public let values: [SQLValue]

    /// Creates a row.
    public init(columns: [String], values: [SQLValue]) {
        self.columns = columns
        self.values = values
    }

    /// The value at `index`.
    public subscript(index: Int) -> SQLValue { values[index] }

    /// The value of the column named `name` (`NULL` when no such column).
    public subscript(name: String) -> SQLValue {
        guard let index = columns.firstIndex(of: name) else { return .null }
        return values[index]
    }

    /// The non-NULL integer in column `name`; throws ``RowDecodingError`` when it is missing or not an integer.
    public func int64(_ name: String) throws(RowDecodingError) -> Int64 {
        guard let value = self[name].int64 else { throw RowDecodingError(column: name, expected: "integer") }
        return value
    }

    /// The non-NULL integer in column `name` as an `Int`.
    public func int(_ name: String) throws(RowDecodingError) -> Int { Int(try int64(name)) }

    /// The non-NULL number in column `name`; throws ``RowDecodingError`` when it is missing or not a number.
    public func double(_ name: String) throws(RowDecodingError) -> Double {
        guard let value = self[name].double else { throw RowDecodingError(column: name, expected: "number") }
        return value
    }

    /// The non-NULL text in column `name`; throws ``RowDecodingError`` when it is missing or not text.
    public func string(_ name: String) throws(RowDecodingError) -> String {
        guard let value = self[name].string else { throw RowDecodingError(column: name, expected: "text") }
        return value
    }
}

/// A column a query was expected to return is missing, NULL or of another type: a defect in the query.
public struct RowDecodingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The column's name.
    public var column: String
    /// What it should have held.
    public var expected: String

    /// Creates an error.
    public init(column: String, expected: String) {
        self.column = column
        self.expected = expected
    }

    /// What is wrong.
    public var description: String { "column \(column): expected \(expected)" }
}
