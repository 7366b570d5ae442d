/// Named, append-only schema migrations, each run once, in order, and recorded in `schema_migrations`.
public struct Migrator: Sendable {
    /// One migration: a unique name and the work it does.
    public struct Migration: Sendable {
        /// The name recorded once the migration has run.
        public let name: String
        /// The migration's work, run inside the migration transaction.
        public let apply: @Sendable (Database) throws -> Void
    }

    /// The migrations, in the order they run.
    public private(set) var migrations: [Migration] = []

    /// An empty migrator.
    public init() {}

    /// Appends a migration. Names must be unique; never reorder or edit a migration that has shipped.
    public mutating func register(_ name: String, _ apply: @escaping @Sendable (Database) throws -> Void) {
        precondition(!migrations.contains { $0.name == name }, "duplicate migration name \(name)")
        migrations.append(Migration(name: name, apply: apply))
    }

    /// Runs the migrations not yet recorded, each in its own transaction. Returns the names it ran.
    @discardableResult
    public func migrate(_ pool: DatabasePool) throws -> [String] {
        try pool.writeWithoutTransaction { db in try migrate(db) }
    }

    /// Runs the migrations not yet recorded on one connection. Returns the names it ran.
    @discardableResult
    public func migrate(_ db: Database) throws -> [String] {
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                name TEXT PRIMARY KEY NOT NULL,
                applied_at REAL NOT NULL
            )
            """)
        let applied = Set(try db.query("SELECT name FROM schema_migrations").compactMap { $0[0].string })
        var ran: [String] = []
        for migration in migrations where !applied.contains(migration.name) {
            try db.transaction(.immediate) {
                try migration.apply(db)
                try db.run(
                    "INSERT INTO schema_migrations (name, applied_at) VALUES (?, (julianday('now') - 2440587.5) * 86400.0)",
                    migration.name)
            }
            ran.append(migration.name)
        }
        return ran
    }

    /// The names recorded as applied, in the order they ran.
    public static func appliedMigrations(_ db: Database) throws -> [String] {
        let exists = try db.scalar(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'")
        guard exists.int64 == 1 else { return [] }
        return try db.query("SELECT name FROM schema_migrations ORDER BY rowid").compactMap { $0[0].string }
    }
}
