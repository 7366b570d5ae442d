import Durations
import Foundation
import Locking
import PostgresKit
import SQLiteKit

/// Where a store keeps its data: the `--database` URL of `mailboxd`.
public enum StoreDatabase: Sendable, Equatable, CustomStringConvertible {
    /// A SQLite file (the embedded default): one process owns it.
    case sqlite(path: String)
    /// A PostgreSQL database, shared by any number of processes: a libpq URI.
    case postgres(url: String)

    /// Parses `text`: `postgresql://…` or `postgres://…` (a libpq URI, with a host list for a cluster:
    /// `postgresql://h1:p1,h2:p2/db?target_session_attrs=read-write`), `sqlite:PATH`, or a file path. Throws
    /// `.invalidArgument` naming what is wrong, never echoing the URL (it may hold a password).
    public init(parsing text: String) throws {
        if text.hasPrefix("postgresql://") || text.hasPrefix("postgres://") {
            do {
                _ = try PostgresURL(text)
            } catch {
                throw MailboxStoreError.invalidArgument("database URL (\(error.description))")
            }
            self = .postgres(url: text)
        } else if text.hasPrefix("sqlite:") {
            let path = String(text.dropFirst("sqlite:".count))
            guard !path.isEmpty else { throw MailboxStoreError.invalidArgument("database URL (sqlite: needs a path)") }
            self = .sqlite(path: path)
        } else if let colon = text.firstIndex(of: ":"), text[..<colon].allSatisfy(\.isLetter),
            text[text.index(after: colon)...].hasPrefix("//")
        {
            throw MailboxStoreError.invalidArgument(
                "database URL (scheme \(text[..<colon].prefix(20)) is not sqlite: or postgresql://)")
        } else {
            guard !text.isEmpty else { throw MailboxStoreError.invalidArgument("database URL (empty)") }
            self = .sqlite(path: text)
        }
    }

    /// Whether several processes may share it (PostgreSQL): it is a server that may be unreachable for a while.
    public var isShared: Bool {
        if case .postgres = self { return true }
        return false
    }

    /// The location without any password, for logs.
    public var description: String {
        switch self {
        case .sqlite(let path): return "sqlite:\(path)"
        case .postgres(let url): return (try? PostgresURL(url).redacted) ?? "postgresql://…"
        }
    }
}

/// What an engine gives the store: transactions on connections that speak the store's SQL. The rules (modseq,
/// change log, outbox, pacing, leases) live in `MailboxStore` and are written once against `SQLConnection`; an
/// engine supplies only how transactions run, how they are grouped, and its failures as ``StorageFailure``.
protocol StoreEngine: Sendable {
    /// Runs `body` in a write transaction with the ledger its deliveries share, and returns its result once the
    /// transaction committed. With `defers`, `body` may leave account bookkeeping in the ledger for the end of the
    /// transaction; without, pending bookkeeping is written before it.
    func write<T: Sendable>(
        defers: Bool, _ body: @escaping @Sendable (any SQLConnection, BatchLedger) throws -> T
    ) async throws -> T

    /// ``write(defers:_:)`` for a caller on a thread of its own that waits for the commit: `completion` gets the
    /// result once the transaction committed, on the engine's thread (on SQLite, the writer's, with no task).
    func submitWrite<T: Sendable>(
        defers: Bool, _ body: @escaping @Sendable (any SQLConnection, BatchLedger) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void)

    /// Runs `body` in a read transaction that sees one consistent snapshot.
    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T

    /// Runs the migrations the database lacks, one process at a time; refuses a database a newer build migrated.
    func migrate(_ migrations: [StoreMigration]) throws

    /// The names of the migrations the database holds, in the order they ran.
    func appliedMigrations() async throws -> [String]

    /// Runs `body` on a connection for set-up work (migrations, the epoch), before the store serves anything.
    func setUp<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) throws -> T

    /// The write path's totals so far.
    var statistics: WriterStatistics { get }

    /// Where a task that reads several times best runs: there each ``read(_:)`` is a call, not a thread hop (the
    /// SQLite readers' threads); `nil` when reads do not run on an executor of their own.
    var readExecutor: (any TaskExecutor)? { get }

    /// The engine's own consistency check (`"ok"` when sound).
    func engineCheck() async throws -> String
}

/// A database failure, from whichever engine: never holds message content or parameter values.
public struct StorageFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// What the failure means for the caller.
    public enum Kind: Sendable, Equatable {
        /// The database cannot take the work now (unreachable, restarting, busy, disk full, read-only): try later.
        case unavailable
        /// A UNIQUE constraint refused the write.
        case uniqueViolation
        /// Anything else.
        case other
    }

    /// What the failure means.
    public let kind: Kind
    /// The engine (`sqlite`, `postgresql`).
    public let engine: String
    /// The engine's code: SQLite's extended result code, PostgreSQL's SQLSTATE.
    public let code: String
    /// The engine's message.
    public let message: String

    /// Creates a failure from its parts.
    public init(kind: Kind, engine: String, code: String, message: String) {
        self.kind = kind
        self.engine = engine
        self.code = code
        self.message = message
    }

    init(_ error: SQLiteError) {
        let kind: Kind =
            error.extendedCode == SQLiteError.constraintUnique
            ? .uniqueViolation : (error.isBusy || error.isDiskFull || error.isReadOnly ? .unavailable : .other)
        self.init(kind: kind, engine: "sqlite", code: String(error.extendedCode), message: error.message)
    }

    init(_ error: PostgresError) {
        let kind: Kind = error.isUniqueViolation ? .uniqueViolation : (error.isUnavailable ? .unavailable : .other)
        self.init(kind: kind, engine: "postgresql", code: error.sqlstate ?? "connection", message: error.message)
    }

    /// Whether trying again later may succeed.
    public var isUnavailable: Bool { kind == .unavailable }

    /// `engine code: message`.
    public var description: String { "\(engine) \(code): \(message)" }

    /// `error` as a storage failure, when it is a database error.
    static func from(_ error: any Error) -> StorageFailure? {
        switch error {
        case let error as SQLiteError: return StorageFailure(error)
        case let error as PostgresError: return StorageFailure(error)
        default: return nil
        }
    }
}

/// The embedded engine: one SQLite file, a single group-committing writer (``WriteBatcher``) and reader
/// connections that see WAL snapshots.
final class SQLiteEngine: StoreEngine {
    let pool: DatabasePool
    let batcher: WriteBatcher
    /// The threads reads run on (SQLite's calls block; the cooperative pool must not wait on them).
    let readers = BlockingExecutor(threads: 4, name: "mailbox-sqlite-read")
    /// The deliveries' shared bookkeeping in the writer's current batch.
    let ledger: BatchLedger

    init(
        path: String, synchronous: SynchronousMode, maximumBatch: Int, ledger: BatchLedger,
        committed: @escaping @Sendable (_ signalsQueued: Bool, _ changes: [CommittedChange]) -> Void
    ) throws {
        var configuration = DatabaseConfiguration()
        configuration.synchronous = synchronous
        pool = try DatabasePool(path: path, configuration: configuration)
        self.ledger = ledger
        batcher = WriteBatcher(
            pool: pool, maximumBatch: maximumBatch, lingerMicroseconds: synchronous == .full ? 300 : 200,
            deferred: .init(
                settle: { try ledger.settle($0) },
                committed: {
                    if ledger.signalsQueued || !ledger.changes.isEmpty {
                        committed(ledger.signalsQueued, ledger.changes)
                    }
                },
                discard: { ledger.discard() }))
    }

    func migrate(_ migrations: [StoreMigration]) throws {
        try pool.writeWithoutTransaction { db in
            var migrator = Migrator()
            for migration in try StoreMigration.pending(applied: Migrator.appliedMigrations(db), in: migrations) {
                migrator.register(migration.name) { try $0.execute(migration.sqlite) }
            }
            try migrator.migrate(db)
        }
    }

    func appliedMigrations() async throws -> [String] { try pool.read { try Migrator.appliedMigrations($0) } }

    func write<T: Sendable>(
        defers: Bool, _ body: @escaping @Sendable (any SQLConnection, BatchLedger) throws -> T
    ) async throws -> T {
        let ledger = ledger
        return try await batcher.perform(defers: defers) { db in try body(db, ledger) }
    }

    func submitWrite<T: Sendable>(
        defers: Bool, _ body: @escaping @Sendable (any SQLConnection, BatchLedger) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        let ledger = ledger
        batcher.submit(defers: defers, { db in try body(db, ledger) }, completion: completion)
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await readers.run { [pool] in try pool.read { try body($0) } }
    }

    deinit { readers.shutdown() }

    func setUp<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) throws -> T {
        try pool.writeWithoutTransaction { try body($0) }
    }

    var statistics: WriterStatistics { batcher.statistics }

    var readExecutor: (any TaskExecutor)? { readers }

    func engineCheck() async throws -> String { try pool.read { try $0.integrityCheck() } }
}

/// The shared engine: a PostgreSQL database that several mailboxd processes use at once. Each write is its own
/// transaction on a pooled connection (the server's WAL flush groups concurrent commits); a write that loses a
/// race (deadlock, serialization failure) is run again, a few times.
final class PostgresEngine: StoreEngine {
    let pool: PostgresPool
    let url: String
    let makeLedger: @Sendable () -> BatchLedger
    let committed: @Sendable (_ signalsQueued: Bool, _ changes: [CommittedChange]) -> Void
    /// This process's token in the changes it announces, so its own listener passes them over.
    let instanceToken: String
    private let totals = LockedValue(WriterStatistics())
    /// How often a write that lost a race is tried in all.
    static let attempts = 5

    init(
        url: String, connections: Int, instanceToken: String, makeLedger: @escaping @Sendable () -> BatchLedger,
        committed: @escaping @Sendable (_ signalsQueued: Bool, _ changes: [CommittedChange]) -> Void
    ) {
        self.url = url
        self.instanceToken = instanceToken
        self.makeLedger = makeLedger
        self.committed = committed
        pool = PostgresPool(url: url, size: connections, name: "mailbox-pg")
    }

    deinit { pool.close() }

    /// The channel a transaction that queued signals notifies.
    static let outboxChannel = "signalfetch_outbox"
    /// The channel every transaction that changed accounts notifies, with `TOKEN ACCOUNT:MODSEQ …`: the other
    /// instances' IDLE connections and event streams wake from it (``RemoteChanges``).
    static let changesChannel = "signalfetch_changes"

    /// The NOTIFY statements announcing `changes` (a payload stays far below PostgreSQL's 8000 bytes).
    static func changeNotices(_ changes: [CommittedChange], token: String) -> [String] {
        var newest: [Int64: Int64] = [:]
        for change in changes { newest[change.accountID] = max(newest[change.accountID] ?? .min, change.modseq) }
        let entries = newest.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }
        return stride(from: 0, to: entries.count, by: 200).map { start in
            let slice = entries[start..<min(entries.count, start + 200)]
            return "NOTIFY \(changesChannel), '\(token) \(slice.joined(separator: " "))'"
        }
    }

    /// The advisory lock key migrations hold, so processes starting at once migrate one after another.
    static let migrationLock: Int64 = 0x5349_474E_4D49_4752  // "SIGNMIGR"

    func migrate(_ migrations: [StoreMigration]) throws {
        let db = try PostgresConnection(url: url)
        _ = try db.query("SELECT pg_advisory_lock(?)", Self.migrationLock)
        defer { _ = try? db.query("SELECT pg_advisory_unlock(?)", Self.migrationLock) }
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                name TEXT PRIMARY KEY NOT NULL,
                applied_at DOUBLE PRECISION NOT NULL,
                position BIGINT GENERATED ALWAYS AS IDENTITY
            )
            """)
        for migration in try StoreMigration.pending(applied: Self.appliedMigrations(db), in: migrations) {
            try db.transaction {
                try db.execute(migration.postgres)
                try db.run(
                    "INSERT INTO schema_migrations (name, applied_at) VALUES (?, extract(epoch FROM now()))",
                    migration.name)
            }
        }
    }

    func appliedMigrations() async throws -> [String] {
        try await pool.perform { try Self.appliedMigrations($0) }
    }

    /// The applied migrations' names in the order they ran (the identity column stands for SQLite's rowid).
    static func appliedMigrations(_ db: PostgresConnection) throws -> [String] {
        try db.query("SELECT name FROM schema_migrations ORDER BY position").map { try $0.string("name") }
    }

    func write<T: Sendable>(
        defers: Bool, _ body: @escaping @Sendable (any SQLConnection, BatchLedger) throws -> T
    ) async throws -> T {
        try await pool.perform(transaction(body))
    }

    func submitWrite<T: Sendable>(
        defers: Bool, _ body: @escaping @Sendable (any SQLConnection, BatchLedger) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        pool.submit(transaction(body), completion: completion)
    }

    /// `body` as one transaction on a pool connection with its own ledger, retried on a serialization failure,
    /// with NOTIFY for queued signals and the commit observers told after COMMIT.
    private func transaction<T: Sendable>(
        _ body: @escaping @Sendable (any SQLConnection, BatchLedger) throws -> T
    ) -> @Sendable (PostgresConnection) throws -> T {
        let makeLedger = makeLedger
        let totals = totals
        let committed = committed
        let instanceToken = instanceToken
        return { connection in
            var attempt = 1
            while true {
                let ledger = makeLedger()
                do {
                    var bodyEnd: UInt64 = 0
                    let result = try connection.transaction {
                        let result = try body(connection, ledger)
                        try ledger.settle(connection)
                        // Delivered at COMMIT, to every process listening: their dispatchers wake at once.
                        if ledger.signalsQueued { try connection.executeDeferred("NOTIFY \(Self.outboxChannel)") }
                        for notice in Self.changeNotices(ledger.changes, token: instanceToken) {
                            try connection.executeDeferred(notice)
                        }
                        bodyEnd = MonotonicTime.nanoseconds()
                        return result
                    }
                    let commitSeconds = Double(MonotonicTime.nanoseconds() - bodyEnd) / 1e9
                    if ledger.signalsQueued || !ledger.changes.isEmpty {
                        committed(ledger.signalsQueued, ledger.changes)
                    }
                    totals.withLock {
                        $0.batches += 1
                        $0.writes += 1
                        $0.commitSeconds += commitSeconds
                    }
                    return result
                } catch let error as PostgresError where error.isRetryable && attempt < Self.attempts {
                    attempt += 1
                }
            }
        }
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await pool.perform { connection in
            try connection.transaction(.repeatableReadOnly) { try body(connection) }
        }
    }

    func setUp<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) throws -> T {
        let connection = try PostgresConnection(url: url)
        return try body(connection)
    }

    var statistics: WriterStatistics { totals.withLock { $0 } }

    /// Each read waits for a pooled connection's thread: no executor would save a hop.
    var readExecutor: (any TaskExecutor)? { nil }

    /// No message or tombstone holds a modseq its account has not reached.
    func engineCheck() async throws -> String {
        try await read { db in
            let ahead =
                try db.scalar(
                    """
                    SELECT (SELECT count(*) FROM messages m JOIN accounts a ON a.id = m.account_id
                            WHERE m.modseq > a.modseq)
                         + (SELECT count(*) FROM tombstones t JOIN accounts a ON a.id = t.account_id
                            WHERE t.modseq > a.modseq)
                    """
                ).int ?? 0
            return ahead == 0 ? "ok" : "\(ahead) rows hold a modseq their account has not reached"
        }
    }
}
