/// One connection to a SQL database, whatever the engine: the small set of operations the store's rules are
/// written against (see `MailboxStore`). A connection is used by one thread at a time.
///
/// SQL passed to it uses `?` placeholders, numbered in order; an engine whose own spelling differs (PostgreSQL's
/// `$1`) translates them. Engine-specific SQL comes from ``dialect``.
public protocol SQLConnection: AnyObject {
    /// How this engine spells what standard SQL leaves open.
    var dialect: SQLDialect { get }

    /// Runs `sql` with `arguments` and returns the number of rows it changed.
    @discardableResult
    func run(_ sql: String, arguments: [any SQLBindable]) throws -> Int

    /// Runs a query and returns every row.
    func query(_ sql: String, arguments: [any SQLBindable]) throws -> [Row]

    /// Runs `sql`, whose changed-row count the caller does not need, when the engine finds it cheapest: at once,
    /// or (PostgreSQL, inside a transaction) with the next statement that needs an answer or the COMMIT, in the same
    /// round trip. An error in it then fails that later statement, and with it the transaction.
    func runDeferred(_ sql: String, arguments: [any SQLBindable]) throws
}

extension SQLConnection {
    /// Runs `sql` at once (an engine whose statements cost a round trip each defers it).
    public func runDeferred(_ sql: String, arguments: [any SQLBindable]) throws {
        _ = try run(sql, arguments: arguments)
    }

    /// Runs `sql` with `arguments` and returns the number of rows it changed.
    @discardableResult
    public func run(_ sql: String, _ arguments: any SQLBindable...) throws -> Int {
        try run(sql, arguments: arguments)
    }

    /// ``runDeferred(_:arguments:)`` with its arguments listed.
    public func runDeferred(_ sql: String, _ arguments: any SQLBindable...) throws {
        try runDeferred(sql, arguments: arguments)
    }

    /// Runs a query and returns every row.
    public func query(_ sql: String, _ arguments: any SQLBindable...) throws -> [Row] {
        try query(sql, arguments: arguments)
    }

    /// Runs a query and returns its first row, if any.
    public func queryOne(_ sql: String, _ arguments: any SQLBindable...) throws -> Row? {
        try query(sql, arguments: arguments).first
    }

    /// Runs a query and returns the first column of its first row (`NULL` when no row).
    public func scalar(_ sql: String, _ arguments: any SQLBindable...) throws -> SQLValue {
        try query(sql, arguments: arguments).first?.values.first ?? .null
    }
}

/// What differs between the SQL of the engines the project runs on. Everything else is written once, in the
/// subset SQLite and PostgreSQL share (`ON CONFLICT … DO UPDATE`, `RETURNING`, partial indexes, `CASE`).
public struct SQLDialect: Sendable, Equatable {
    /// The engine's name, for logs and errors.
    public let name: String
    /// The function that returns the largest of its arguments (`max` in SQLite, `greatest` in PostgreSQL).
    public let greatestFunction: String
    /// The function that returns the smallest of its arguments.
    public let leastFunction: String
    /// Appended to a `SELECT` that locks the rows it reads until the transaction ends (empty where the engine has
    /// a single writer, so reading in a write transaction already excludes every other writer).
    public let lockRows: String
    /// Whether several processes may write at once (each must then lock what it reads to decide a write).
    public let hasConcurrentWriters: Bool
    /// Whether a statement may write and read in one: `UPDATE … RETURNING`, and an `UPDATE` inside `WITH`
    /// (PostgreSQL, where each statement is a network round trip). SQLite has RETURNING but gathers its rows in a
    /// temporary table, ten times the cost of an UPDATE and a SELECT; there two statements are cheaper.
    public let writesAndReadsInOneStatement: Bool

    /// Creates a dialect.
    public init(
        name: String, greatestFunction: String, leastFunction: String, lockRows: String, hasConcurrentWriters: Bool,
        writesAndReadsInOneStatement: Bool
    ) {
        self.name = name
        self.greatestFunction = greatestFunction
        self.leastFunction = leastFunction
        self.lockRows = lockRows
        self.hasConcurrentWriters = hasConcurrentWriters
        self.writesAndReadsInOneStatement = writesAndReadsInOneStatement
    }

    /// ``lockRows`` for a `SELECT` that joins tables and locks only the rows of `table` (an alias in its FROM).
    public func lockRows(of table: String) -> String { lockRows.isEmpty ? "" : "\(lockRows) OF \(table)" }

    /// `greatest(a, b, …)` in this dialect.
    public func greatest(_ expressions: String...) -> String {
        "\(greatestFunction)(\(expressions.joined(separator: ", ")))"
    }

    /// `least(a, b, …)` in this dialect.
    public func least(_ expressions: String...) -> String {
        "\(leastFunction)(\(expressions.joined(separator: ", ")))"
    }

    /// Appended to a `SELECT` that claims rows of `table`: it locks them and skips the rows another transaction
    /// holds, so concurrent claimers take different rows (empty with a single writer).
    public func claimRows(of table: String) -> String {
        hasConcurrentWriters ? lockRows(of: table) + " SKIP LOCKED" : ""
    }

    /// Dialects are equal when they are the same engine's.
    public static func == (lhs: SQLDialect, rhs: SQLDialect) -> Bool { lhs.name == rhs.name }

    /// SQLite: one writer at a time, `max`/`min` with several arguments.
    public static let sqlite = SQLDialect(
        name: "sqlite", greatestFunction: "max", leastFunction: "min", lockRows: "", hasConcurrentWriters: false,
        writesAndReadsInOneStatement: false)

    /// PostgreSQL: concurrent writers, row locks, `SKIP LOCKED`.
    public static let postgres = SQLDialect(
        name: "postgresql", greatestFunction: "greatest", leastFunction: "least", lockRows: " FOR UPDATE",
        hasConcurrentWriters: true, writesAndReadsInOneStatement: true)
}
