import Locking
import SQLiteKit
import TestSupport
import Testing

@Suite struct MigratorTests {
    @Test func migrationsRunOnceAndInOrder() throws {
        let dir = try TemporaryDirectory()
        let log = LockedValue<[String]>([])
        var migrator = Migrator()
        migrator.register("001-create-a") { db in
            log.withLock { $0.append("a") }
            try db.execute("CREATE TABLE a (id INTEGER PRIMARY KEY)")
        }
        migrator.register("002-create-b") { db in
            log.withLock { $0.append("b") }
            try db.execute("CREATE TABLE b (a INTEGER REFERENCES a(id))")
        }
        let pool = try DatabasePool(path: dir.path("m.sqlite"))
        #expect(try migrator.migrate(pool) == ["001-create-a", "002-create-b"])
        #expect(try migrator.migrate(pool) == [])

        // Reopening the file finds the migrations recorded.
        let reopened = try DatabasePool(path: dir.path("m.sqlite"))
        #expect(try migrator.migrate(reopened) == [])
        #expect(log.withLock { $0 } == ["a", "b"])
        #expect(try reopened.read { try Migrator.appliedMigrations($0) } == ["001-create-a", "002-create-b"])

        // Appending a migration runs only the new one.
        migrator.register("003-index") { db in try db.execute("CREATE INDEX b_a ON b(a)") }
        #expect(try migrator.migrate(reopened) == ["003-index"])
    }

    @Test func aFailingMigrationLeavesNoTrace() throws {
        var migrator = Migrator()
        migrator.register("001-ok") { try $0.execute("CREATE TABLE ok (v INTEGER)") }
        migrator.register("002-broken") { db in
            try db.execute("CREATE TABLE half (v INTEGER)")
            try db.execute("THIS IS NOT SQL")
        }
        let pool = try DatabasePool.inMemory()
        #expect(throws: SQLiteError.self) { try migrator.migrate(pool) }
        let tables = try pool.read { db in
            try db.query("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name").compactMap { $0[0].string }
        }
        #expect(tables == ["ok", "schema_migrations"])
        #expect(try pool.read { try Migrator.appliedMigrations($0) } == ["001-ok"])
    }
}
