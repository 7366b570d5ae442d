import Foundation
import SQLiteKit
import TestSupport
import Testing

@Suite struct DatabaseTests {
    @Test func opensFileInWALModeWithForeignKeys() throws {
        let dir = try TemporaryDirectory()
        let pool = try DatabasePool(path: dir.path("wal.sqlite"))
        let mode = try pool.writeWithoutTransaction { try $0.scalar("PRAGMA journal_mode") }
        let foreignKeys = try pool.read { try $0.scalar("PRAGMA foreign_keys") }
        #expect(mode == .text("wal"))
        #expect(foreignKeys == .integer(1))
    }

    @Test func typedBindingAndReadingRoundTrip() throws {
        let pool = try DatabasePool.inMemory()
        try pool.write { db in
            try db.execute("CREATE TABLE t (i INTEGER, r REAL, s TEXT, b BLOB, n TEXT)")
            try db.run(
                "INSERT INTO t VALUES (?, ?, ?, ?, ?)", Int64.max, 2.5, "héllo ✉️", [UInt8]([0, 1, 255]),
                String?.none)
        }
        let row = try #require(try pool.read { try $0.queryOne("SELECT i, r, s, b, n FROM t") })
        #expect(row["i"] == .integer(Int64.max))
        #expect(row["r"] == .real(2.5))
        #expect(row["s"] == .text("héllo ✉️"))
        #expect(row["b"] == .blob([0, 1, 255]))
        #expect(row["n"] == .null)
    }

    @Test func textKeepsEveryCharacterIncludingNUL() throws {
        // Found by fuzzing the API: text bound with length -1 ended at its first NUL, so "ab\0cd" was stored as
        // "ab" and a username "fuzz\0x" matched the account "fuzz".
        let pool = try DatabasePool.inMemory()
        try pool.write { db in
            try db.execute("CREATE TABLE t (s TEXT)")
            try db.run("INSERT INTO t VALUES (?)", "ab\u{0}cd")
            try db.run("INSERT INTO t VALUES (?)", "")
        }
        let stored = try pool.read { try $0.query("SELECT s FROM t ORDER BY rowid").map { $0["s"] } }
        let matches = try pool.read { try $0.scalar("SELECT count(*) FROM t WHERE s = ?", "ab") }
        #expect(stored == [.text("ab\u{0}cd"), .text("")])
        #expect(matches == .integer(0))
    }

    @Test func cachedStatementsNeverReuseEarlierBindings() throws {
        let pool = try DatabasePool.inMemory()
        let (second, rows) = try pool.write { db -> (SQLValue, [Row]) in
            try db.execute("CREATE TABLE t (a INTEGER, b TEXT)")
            try db.run("INSERT INTO t VALUES (?, ?)", 1, "one")
            // The same cached statement with one argument fewer: the second parameter must be NULL, not "one".
            try db.run("INSERT INTO t VALUES (?, ?)", 2)
            let second = try db.scalar("SELECT b FROM t WHERE a = 2")
            // Alternating statements, each run again with new values.
            for n in 3...6 {
                try db.run("INSERT INTO t VALUES (?, ?)", n, "n\(n)")
                try db.run("UPDATE t SET b = ? WHERE a = ?", "u\(n)", n - 1)
            }
            return (second, try db.query("SELECT a, b FROM t ORDER BY a"))
        }
        #expect(second == .null)
        #expect(rows.map { $0["a"] } == (1...6).map { .integer(Int64($0)) })
        #expect(rows.map { $0["b"] } == ["one", "u3", "u4", "u5", "u6", "n6"].map { .text($0) })
    }

    @Test func constraintViolationSurfacesExtendedCode() throws {
        let pool = try DatabasePool.inMemory()
        try pool.write { try $0.execute("CREATE TABLE u (name TEXT UNIQUE NOT NULL)") }
        try pool.write { try $0.run("INSERT INTO u VALUES (?)", "alice") }
        let error = #expect(throws: SQLiteError.self) {
            try pool.write { try $0.run("INSERT INTO u VALUES (?)", "alice") }
        }
        #expect(error?.extendedCode == SQLiteError.constraintUnique)
        #expect(error?.isConstraintViolation == true)
        #expect(error?.sql == "INSERT INTO u VALUES (?)")
        let notNull = #expect(throws: SQLiteError.self) {
            try pool.write { try $0.run("INSERT INTO u VALUES (?)", String?.none) }
        }
        #expect(notNull?.extendedCode == SQLiteError.constraintNotNull)
    }

    @Test func foreignKeysAreEnforced() throws {
        let pool = try DatabasePool.inMemory()
        try pool.write { db in
            try db.execute("CREATE TABLE p (id INTEGER PRIMARY KEY); CREATE TABLE c (p INTEGER REFERENCES p(id))")
        }
        let error = #expect(throws: SQLiteError.self) { try pool.write { try $0.run("INSERT INTO c VALUES (42)") } }
        #expect(error?.extendedCode == SQLiteError.constraintForeignKey)
    }

    @Test func failedWriteRollsBackEverything() throws {
        let pool = try DatabasePool.inMemory()
        try pool.write { try $0.execute("CREATE TABLE t (v INTEGER UNIQUE)") }
        #expect(throws: SQLiteError.self) {
            try pool.write { db in
                try db.run("INSERT INTO t VALUES (1)")
                try db.run("INSERT INTO t VALUES (1)")
            }
        }
        #expect(try pool.read { try $0.scalar("SELECT count(*) FROM t") } == .integer(0))
    }

    @Test func savepointRollsBackOnlyItsOwnWork() throws {
        let pool = try DatabasePool.inMemory()
        try pool.write { try $0.execute("CREATE TABLE t (v INTEGER UNIQUE)") }
        try pool.write { db in
            try db.run("INSERT INTO t VALUES (1)")
            _ = try? db.savepoint { try db.run("INSERT INTO t VALUES (1)") }
            try db.savepoint { try db.run("INSERT INTO t VALUES (2)") }
        }
        #expect(
            try pool.read { try $0.query("SELECT v FROM t ORDER BY v").map { $0[0] } } == [.integer(1), .integer(2)])
    }

    @Test func statementCacheReusesPreparedStatements() throws {
        let db = try Database(path: ":memory:")
        let first = try db.cachedStatement("SELECT 1")
        let second = try db.cachedStatement("SELECT 1")
        #expect(first === second)
        #expect(try db.makeStatement("SELECT 1") !== first)
    }

    @Test func readersSeeCommittedSnapshotsWhileWriterWorks() async throws {
        let dir = try TemporaryDirectory()
        let pool = try DatabasePool(path: dir.path("concurrent.sqlite"))
        try pool.write { try $0.execute("CREATE TABLE t (v INTEGER NOT NULL)") }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for i in 0..<200 { try pool.write { try $0.run("INSERT INTO t VALUES (?)", i) } }
            }
            for _ in 0..<4 {
                group.addTask {
                    var last: Int64 = 0
                    for _ in 0..<200 {
                        // Inside one read transaction both counts come from the same snapshot.
                        let (a, b) = try pool.read { db in
                            (
                                try db.scalar("SELECT count(*) FROM t").int64!,
                                try db.scalar("SELECT count(*) FROM t").int64!
                            )
                        }
                        #expect(a == b)
                        #expect(a >= last)
                        last = a
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try pool.read { try $0.scalar("SELECT count(*) FROM t") } == .integer(200))
    }

    @Test func openingAFolderFailsWithAClearError() throws {
        let dir = try TemporaryDirectory()
        let error = #expect(throws: SQLiteError.self) { _ = try Database(path: dir.url.path) }
        #expect(error?.message.isEmpty == false)
    }

    @Test("a file that is not a database fails its first PRAGMA with a clear error, open after open")
    func openingAFileThatIsNotADatabase() throws {
        let dir = try TemporaryDirectory()
        let path = dir.url.appendingPathComponent("not-a-database").path
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: path))
        for _ in 0..<50 {
            let error = #expect(throws: SQLiteError.self) { _ = try Database(path: path) }
            #expect(error?.message.contains("not a database") == true)
        }
    }
}
