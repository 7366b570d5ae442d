import CSQLite

/// An error reported by SQLite, with the extended result code, SQLite's message and the SQL that failed.
public struct SQLiteError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The extended result code (for example 2067, `SQLITE_CONSTRAINT_UNIQUE`).
    public let extendedCode: Int32
    /// SQLite's own message for the failure.
    public let message: String
    /// The SQL being run, when the failure belongs to a statement.
    public let sql: String?

    /// The primary result code (the low byte of `extendedCode`, for example 19, `SQLITE_CONSTRAINT`).
    public var code: Int32 { extendedCode & 0xff }

    /// Creates an error from its parts.
    public init(extendedCode: Int32, message: String, sql: String? = nil) {
        self.extendedCode = extendedCode
        self.message = message
        self.sql = sql
    }

    init(connection: OpaquePointer?, code: Int32, sql: String? = nil) {
        let extended = connection.map { sqlite3_extended_errcode($0) } ?? code
        let message =
            connection.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
            ?? String(cString: sqlite3_errstr(code))
        self.init(extendedCode: extended == 0 ? code : extended, message: message, sql: sql)
    }

    /// A one-line description: code, message and SQL.
    public var description: String {
        var text = "SQLite error \(extendedCode): \(message)"
        if let sql { text += " — while running: \(sql)" }
        return text
    }

    /// Whether the failure is a constraint violation (UNIQUE, FOREIGN KEY, CHECK, NOT NULL, …).
    public var isConstraintViolation: Bool { code == SQLITE_CONSTRAINT }
    /// Whether the database was busy or locked.
    public var isBusy: Bool { code == SQLITE_BUSY || code == SQLITE_LOCKED }
    /// Whether the disk was full.
    public var isDiskFull: Bool { code == SQLITE_FULL }
    /// Whether the database or its folder is read-only.
    public var isReadOnly: Bool { code == SQLITE_READONLY }

    /// `SQLITE_CONSTRAINT_UNIQUE`.
    public static let constraintUnique: Int32 = 2067
    /// `SQLITE_CONSTRAINT_PRIMARYKEY`.
    public static let constraintPrimaryKey: Int32 = 1555
    /// `SQLITE_CONSTRAINT_FOREIGNKEY`.
    public static let constraintForeignKey: Int32 = 787
    /// `SQLITE_CONSTRAINT_NOTNULL`.
    public static let constraintNotNull: Int32 = 1299
    /// `SQLITE_CONSTRAINT_CHECK`.
    public static let constraintCheck: Int32 = 275
}
