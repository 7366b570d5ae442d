import PostgresKit
import TestSupport
import Testing

/// A transaction's statements in fewer round trips, on a real server: the BEGIN with the first statement, deferred
/// statements with the next query or the COMMIT. What must hold is what held with one round trip each: order,
/// atomicity, errors that name their statement, and a connection that goes on after one.
@Suite("PostgreSQL pipelines")
struct PostgresPipelineTests {
    /// Two connections to a new database.
    func connections() throws -> (PostgresConnection, other: PostgresConnection) {
        let url = try PostgresServer.shared().makeDatabase()
        return (try PostgresConnection(url: url), try PostgresConnection(url: url))
    }

    @Test func deferredStatementsRunInOrderBeforeTheNextQueryAndTheRestWithTheCommit() throws {
        let (db, other) = try connections()
        try db.execute("CREATE TABLE items (id integer PRIMARY KEY, note text)")
        let seen = try db.transaction { () throws -> Int in
            try db.runDeferred("INSERT INTO items VALUES (?, ?)", 1, "one")
            try db.runDeferred("INSERT INTO items VALUES (?, ?)", 2, "two")
            let count = try db.scalar("SELECT count(*) FROM items").int ?? -1
            try db.runDeferred("UPDATE items SET note = ? WHERE id = ?", "uno", 1)
            return count
        }
        #expect(seen == 2)
        #expect(!db.isInTransaction)
        #expect(try other.scalar("SELECT note FROM items WHERE id = 1").string == "uno")
    }

    @Test func aDeferredStatementsErrorFailsTheWholeTransactionAndTheConnectionGoesOn() throws {
        let (db, _) = try connections()
        try db.execute("CREATE TABLE items (id integer PRIMARY KEY)")
        try db.run("INSERT INTO items VALUES (?)", 1)
        let failure = #expect(throws: PostgresError.self) {
            try db.transaction {
                try db.runDeferred("INSERT INTO items VALUES (?)", 2)
                try db.runDeferred("INSERT INTO items VALUES (? + 0)", 1)
                try db.runDeferred("INSERT INTO items VALUES (?)", 3)
            }
        }
        #expect(failure?.isUniqueViolation == true)
        #expect(failure?.sql == "INSERT INTO items VALUES (? + 0)")
        #expect(db.isHealthy && !db.isInTransaction)
        #expect(try db.scalar("SELECT count(*) FROM items").int == 1)
        // A query after a failed deferred statement fails too, and nothing of that transaction stays either.
        #expect(throws: PostgresError.self) {
            try db.transaction {
                try db.runDeferred("INSERT INTO items VALUES (? + 0)", 1)
                _ = try db.scalar("SELECT count(*) FROM items")
            }
        }
        try db.transaction { try db.runDeferred("INSERT INTO items VALUES (?)", 2) }
        #expect(try db.query("SELECT id FROM items ORDER BY id").map { try $0.int64("id") } == [1, 2])
    }

    @Test func outsideATransactionADeferredStatementRunsAtOnce() throws {
        let (db, other) = try connections()
        try db.execute("CREATE TABLE items (id integer PRIMARY KEY)")
        try db.runDeferred("INSERT INTO items VALUES (?)", 7)
        #expect(try other.scalar("SELECT count(*) FROM items").int == 1)
    }

    @Test func aDeferredNotifyIsHeardOnceTheTransactionCommits() throws {
        let (db, listener) = try connections()
        try listener.listen("pipeline_test")
        try db.execute("CREATE TABLE items (id integer PRIMARY KEY)")
        try db.transaction {
            try db.runDeferred("INSERT INTO items VALUES (?)", 1)
            try db.executeDeferred("NOTIFY pipeline_test, 'with a payload'")
        }
        #expect(
            try listener.waitForNotifications(timeout: 10) == [
                .init(channel: "pipeline_test", payload: "with a payload")
            ])
        #expect(try listener.scalar("SELECT count(*) FROM items").int == 1)
    }

    @Test func oneConnectionServesTransactionAfterTransaction() throws {
        let (db, _) = try connections()
        try db.execute("CREATE TABLE items (id integer PRIMARY KEY)")
        let backend = try db.scalar("SELECT pg_backend_pid()").int
        for id in 1...200 {
            try db.transaction {
                try db.runDeferred("INSERT INTO items VALUES (?)", id)
                _ = try db.scalar("SELECT count(*) FROM items")
                try db.executeDeferred("NOTIFY pipeline_test")
            }
            let count = try db.transaction(.repeatableReadOnly) { try db.scalar("SELECT count(*) FROM items").int }
            #expect(count == id)
            // Nothing of the pipelines is left unread: a pool would take that for a connection lost while idle.
            #expect(db.isStillConnected())
        }
        #expect(db.isHealthy)
        #expect(try db.scalar("SELECT pg_backend_pid()").int == backend)
    }
}
