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
}
