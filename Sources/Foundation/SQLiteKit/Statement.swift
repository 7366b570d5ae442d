import CSQLite

nonisolated(unsafe) private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// A prepared statement. Owned by its `Database`; never shared across threads.
public final class Statement {
    private let handle: OpaquePointer
    private let connection: OpaquePointer
    /// The SQL this statement was prepared from.
    public let sql: String
    /// The number of `?` parameters.
    private let parameterCount: Int

    init(connection: OpaquePointer, sql: String) throws {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(connection, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            sqlite3_finalize(statement)
            throw SQLiteError(connection: connection, code: rc, sql: sql)
        }
        self.handle = statement
        self.connection = connection
        self.sql = sql
        parameterCount = Int(sqlite3_bind_parameter_count(statement))
    }

    deinit { sqlite3_finalize(handle) }

    /// The number of result columns.
    public var columnCount: Int { Int(sqlite3_column_count(handle)) }

    /// The result column names: read once, and again only when their number changed (a schema change that SQLite
    /// prepared the statement again for), not for every query.
    public var columnNames: [String] {
        let count = sqlite3_column_count(handle)
        if let names = knownColumnNames, names.count == count { return names }
        let names = (0..<count).map { String(cString: sqlite3_column_name(handle, $0)) }
        knownColumnNames = names
        return names
    }
    private var knownColumnNames: [String]?

    /// Resets the statement and binds `values` to its parameters, in order.
    public func bind(_ values: [any SQLBindable]) throws {
        sqlite3_reset(handle)
        // Parameters left unbound must read as NULL, not as the previous run's values.
        if values.count < parameterCount { sqlite3_clear_bindings(handle) }
        for (offset, value) in values.enumerated() {
            try bind(value.sqlValue, at: Int32(offset + 1))
        }
    }

    /// Binds one value to the 1-based parameter `index`.
    public func bind(_ value: SQLValue, at index: Int32) throws {
        let rc: Int32
        switch value {
        case .null: rc = sqlite3_bind_null(handle, index)
        case .integer(let v): rc = sqlite3_bind_int64(handle, index, v)
        case .real(let v): rc = sqlite3_bind_double(handle, index, v)
        case .text(let v): rc = bindText(v, at: index)
        case .blob(let v):
            rc = v.withUnsafeBytes { sqlite3_bind_blob(handle, index, $0.baseAddress, Int32($0.count), transient) }
        }
        guard rc == SQLITE_OK else { throw SQLiteError(connection: connection, code: rc, sql: sql) }
    }

    /// Binds an integer to the 1-based parameter `index` (a fast path for hot loops).
    public func bind(_ value: Int64, at index: Int32) throws {
        let rc = sqlite3_bind_int64(handle, index, value)
        guard rc == SQLITE_OK else { throw SQLiteError(connection: connection, code: rc, sql: sql) }
    }

    /// Binds text to the 1-based parameter `index` (a fast path for hot loops).
    public func bind(_ value: String, at index: Int32) throws {
        let rc = bindText(value, at: index)
        guard rc == SQLITE_OK else { throw SQLiteError(connection: connection, code: rc, sql: sql) }
    }

    /// Binds all of `value`'s UTF-8 bytes, NUL characters included: a length of -1 would make SQLite stop at the
    /// first NUL and store (and compare) only what comes before it.
    private func bindText(_ value: String, at index: Int32) -> Int32 {
        var value = value
        return value.withUTF8 { bytes in
            bytes.withMemoryRebound(to: CChar.self) { text in
                guard let base = text.baseAddress else { return sqlite3_bind_text(handle, index, "", 0, transient) }
                return sqlite3_bind_text(handle, index, base, Int32(text.count), transient)
            }
        }
    }

    /// Resets the statement so it can run again; bindings are kept.
    public func reset() { sqlite3_reset(handle) }

    /// Advances to the next row: `true` when a row is available, `false` when done.
    @discardableResult
    public func step() throws -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let error = SQLiteError(connection: connection, code: rc, sql: sql)
            sqlite3_reset(handle)
            throw error
        }
    }

    /// The value of column `index` in the current row.
    public func column(_ index: Int) -> SQLValue {
        let i = Int32(index)
        switch sqlite3_column_type(handle, i) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(handle, i))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(handle, i))
        case SQLITE_TEXT: return .text(columnString(index) ?? "")
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(handle, i))
            guard count > 0, let pointer = sqlite3_column_blob(handle, i) else { return .blob([]) }
            return .blob([UInt8](UnsafeRawBufferPointer(start: pointer, count: count)))
        default: return .null
        }
    }

    /// Column `index` as an integer (0 when `NULL`).
    public func columnInt64(_ index: Int) -> Int64 { sqlite3_column_int64(handle, Int32(index)) }

    /// Column `index` as text (`nil` when `NULL`).
    public func columnString(_ index: Int) -> String? {
        guard let text = sqlite3_column_text(handle, Int32(index)) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, Int32(index)))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    /// Whether column `index` is `NULL` in the current row.
    public func columnIsNull(_ index: Int) -> Bool { sqlite3_column_type(handle, Int32(index)) == SQLITE_NULL }

    /// The current row as a `Row`.
    public func row() -> Row {
        Row(columns: columnNames, values: (0..<columnCount).map { column($0) })
    }
}
