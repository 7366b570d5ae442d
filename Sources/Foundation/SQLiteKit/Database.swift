import CSQLite
@_exported import SQLSupport

/// How durable a commit is: SQLite's `PRAGMA synchronous`.
public enum SynchronousMode: String, Sendable, CaseIterable {
    /// No fsync: fastest, a power loss may lose recent commits.
    case off = "OFF"
    /// In WAL mode, fsync at checkpoints only: a power loss may lose the last commits, never corrupts.
    case normal = "NORMAL"
    /// fsync on every commit: a commit that returned survives a power loss.
    case full = "FULL"
}

/// How a connection is opened.
public struct DatabaseConfiguration: Sendable {
    /// `PRAGMA synchronous` for the connection.
    public var synchronous: SynchronousMode = .normal
    /// How long a connection waits on a lock held by another connection, in milliseconds.
    public var busyTimeoutMilliseconds: Int32 = 5_000
    /// Whether foreign keys are enforced.
    public var foreignKeys = true
    /// Whether to use write-ahead logging (file databases only).
    public var walMode = true
    /// Whether the connection may only read.
    public var readOnly = false

    /// The defaults: WAL, `synchronous=NORMAL`, foreign keys on, 5 s busy timeout.
    public init() {}
}

/// One SQLite connection. Not thread-safe: use it from one thread at a time, inside the closures of a
/// `DatabasePool`, and never let it escape them.
public final class Database: SQLConnection {
    private let handle: OpaquePointer
    private var statementCache: [String: Statement] = [:]
    private var lastStatement: Statement?
    /// The file path, or `:memory:`.
    public let path: String

    /// Opens (creating if needed) the database at `path`; `:memory:` gives a private in-memory database.
    public init(path: String, configuration: DatabaseConfiguration = DatabaseConfiguration()) throws {
        var connection: OpaquePointer?
        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        flags |= configuration.readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
        let rc = sqlite3_open_v2(path, &connection, flags, nil)
        guard rc == SQLITE_OK, let connection else {
            let error = SQLiteError(connection: connection, code: rc)
            sqlite3_close_v2(connection)
            throw error
        }
        self.handle = connection
        self.path = path
        sqlite3_extended_result_codes(connection, 1)
        sqlite3_busy_timeout(connection, configuration.busyTimeoutMilliseconds)
        // Every property is set from here on, so when a PRAGMA throws, deinit runs and closes the connection, once.
        if configuration.walMode && path != ":memory:" && !configuration.readOnly {
            try execute("PRAGMA journal_mode=WAL")
        }
        try execute("PRAGMA synchronous=\(configuration.synchronous.rawValue)")
        try execute("PRAGMA foreign_keys=\(configuration.foreignKeys ? "ON" : "OFF")")
    }

    deinit {
        lastStatement = nil
        statementCache.removeAll()
        sqlite3_close_v2(handle)
    }

    /// Runs one or more SQL statements that return no rows of interest.
    public func execute(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &message)
        if rc != SQLITE_OK {
            let text = message.map { String(cString: $0) }
            sqlite3_free(message)
            let base = SQLiteError(connection: handle, code: rc, sql: sql)
            throw SQLiteError(extendedCode: base.extendedCode, message: text ?? base.message, sql: sql)
        }
    }

    /// A prepared statement for `sql`, reused from this connection's cache when it was prepared before.
    public func cachedStatement(_ sql: String) throws -> Statement {
        let statement = try preparedStatement(sql)
        statement.reset()
        return statement
    }

    /// The cached statement for `sql`, as it was left. Loops usually run the same statement again and again,
    /// so the last one is compared first, before the cache is hashed.
    private func preparedStatement(_ sql: String) throws -> Statement {
        if let last = lastStatement, last.sql == sql { return last }
        if let statement = statementCache[sql] {
            lastStatement = statement
            return statement
        }
        let statement = try Statement(connection: handle, sql: sql)
        statementCache[sql] = statement
        lastStatement = statement
        return statement
    }

    /// A newly prepared statement for `sql`, not cached.
    public func makeStatement(_ sql: String) throws -> Statement {
        try Statement(connection: handle, sql: sql)
    }

    /// Runs `sql` with `arguments` and returns the number of rows it changed.
    @discardableResult
    public func run(_ sql: String, _ arguments: any SQLBindable...) throws -> Int {
        try run(sql, arguments: arguments)
    }

    /// Runs `sql` with `arguments` and returns the number of rows it changed.
    @discardableResult
    public func run(_ sql: String, arguments: [any SQLBindable]) throws -> Int {
        let statement = try preparedStatement(sql)
        try statement.bind(arguments)  // resets it first
        while try statement.step() {}
        statement.reset()
        return changes
    }

    /// Runs a query and returns every row.
    public func query(_ sql: String, _ arguments: any SQLBindable...) throws -> [Row] {
        try query(sql, arguments: arguments)
    }

    /// Runs a query and returns every row.
    public func query(_ sql: String, arguments: [any SQLBindable]) throws -> [Row] {
        let statement = try cachedStatement(sql)
        try statement.bind(arguments)
        defer { statement.reset() }
        var rows: [Row] = []
        let names = statement.columnNames
        while try statement.step() {
            rows.append(Row(columns: names, values: (0..<names.count).map { statement.column($0) }))
        }
        return rows
    }

    /// Runs a query and returns its first row, if any.
    public func queryOne(_ sql: String, _ arguments: any SQLBindable...) throws -> Row? {
        let statement = try cachedStatement(sql)
        try statement.bind(arguments)
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        return statement.row()
    }

    /// Runs a query and returns the first column of its first row (`NULL` when no row).
    public func scalar(_ sql: String, _ arguments: any SQLBindable...) throws -> SQLValue {
        let statement = try cachedStatement(sql)
        try statement.bind(arguments)
        defer { statement.reset() }
        guard try statement.step() else { return .null }
        return statement.column(0)
    }

    /// SQLite's dialect.
    public var dialect: SQLDialect { .sqlite }

    /// The rowid of the last inserted row on this connection.
    public var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// Rows changed by the last statement.
    public var changes: Int { Int(sqlite3_changes(handle)) }

    /// Whether a transaction is open on this connection.
    public var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    /// The kinds of transaction SQLite offers.
    public enum TransactionKind: String, Sendable {
        /// Takes locks on first use (reads).
        case deferred = "DEFERRED"
        /// Takes the write lock at once, so the transaction never fails to upgrade (writes).
        case immediate = "IMMEDIATE"
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws.
    @discardableResult
    public func transaction<T>(_ kind: TransactionKind = .immediate, _ body: () throws -> T) throws -> T {
        // Transaction control runs as cached prepared statements: no parsing on the hot path.
        try run(kind == .immediate ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED")
        do {
            let result = try body()
            try run("COMMIT")
            return result
        } catch {
            if isInTransaction { try? execute("ROLLBACK") }
            throw error
        }
    }

    /// Runs `body` inside a savepoint: released when it returns, rolled back (alone) when it throws.
    @discardableResult
    public func savepoint<T>(_ body: () throws -> T) throws -> T {
        try run("SAVEPOINT sf_savepoint")
        do {
            let result = try body()
            try run("RELEASE sf_savepoint")
            return result
        } catch {
            try? execute("ROLLBACK TO sf_savepoint")
            try? execute("RELEASE sf_savepoint")
            throw error
        }
    }

    /// The result of `PRAGMA integrity_check` (`"ok"` for a sound database).
    public func integrityCheck() throws -> String {
        try query("PRAGMA integrity_check").map { $0[0].string ?? "" }.joined(separator: "\n")
    }
}
