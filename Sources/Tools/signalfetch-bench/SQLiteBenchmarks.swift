import CSQLite  // the raw C baseline that SQLiteKit is measured against
import Durations
import Foundation
import SQLiteKit

nonisolated(unsafe) private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// Insert throughput through SQLiteKit against the same inserts through direct sqlite3 calls.
enum SQLiteBenchmarks {
    static let schema = "CREATE TABLE items (id INTEGER PRIMARY KEY, n INTEGER NOT NULL, label TEXT NOT NULL)"
    static let insert = "INSERT INTO items (n, label) VALUES (?, ?)"

    /// Rows per second inserting `rows` rows in transactions of `batch` rows, through SQLiteKit (at `kitPath`) and
    /// through direct sqlite3 C calls (at `rawPath`). The two sides take turns batch by batch and only the time
    /// inside each side's batches is summed, so both see the same moments of a noisy machine.
    static func interleavedInsertRates(
        kitPath: String, rawPath: String, rows: Int, batch: Int
    ) throws -> (kit: Double, raw: Double) {
        let pool = try DatabasePool(path: kitPath)
        try pool.writeWithoutTransaction { try $0.execute(schema) }

        var db: OpaquePointer?
        guard sqlite3_open(rawPath, &db) == SQLITE_OK else { throw BenchError("open failed") }
        defer { sqlite3_close(db) }
        sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON", nil, nil, nil)
        sqlite3_exec(db, schema, nil, nil, nil)
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, insert, -1, &statement, nil) == SQLITE_OK else { throw BenchError("prepare") }
        defer { sqlite3_finalize(statement) }

        var kitTime = Duration.zero
        var rawTime = Duration.zero
        var done = 0
        while done < rows {
            let count = min(batch, rows - done)
            let kitStart = ContinuousClock.now
            try pool.write { db in
                for i in 0..<count {
                    try db.run(insert, done + i, "label-\(done + i)")
                }
            }
            kitTime += ContinuousClock.now - kitStart

            let rawStart = ContinuousClock.now
            sqlite3_exec(db, "BEGIN IMMEDIATE", nil, nil, nil)
            for i in 0..<count {
                sqlite3_bind_int64(statement, 1, Int64(done + i))
                sqlite3_bind_text(statement, 2, "label-\(done + i)", -1, transient)
                guard sqlite3_step(statement) == SQLITE_DONE else { throw BenchError("step") }
                sqlite3_reset(statement)
            }
            sqlite3_exec(db, "COMMIT", nil, nil, nil)
            rawTime += ContinuousClock.now - rawStart
            done += count
        }
        return (Double(rows) / kitTime.seconds, Double(rows) / rawTime.seconds)
    }

    /// A child process for crash drills: inserts rows in small transactions forever and prints each committed
    /// row id on its own line, flushed, after its COMMIT returned.
    static func crashWriter(path: String) throws -> Never {
        let pool = try DatabasePool(path: path)
        try pool.writeWithoutTransaction {
            try $0.execute(
                "CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, n INTEGER NOT NULL, label TEXT NOT NULL)")
        }
        var n = 0
        while true {
            let ids = try pool.write { db -> [Int64] in
                var ids: [Int64] = []
                for _ in 0..<5 {
                    try db.run(insert, n, String(repeating: "x", count: 200))
                    ids.append(db.lastInsertRowID)
                    n += 1
                }
                return ids
            }
            let line = ids.map(String.init).joined(separator: "\n") + "\n"
            FileHandle.standardOutput.write(Data(line.utf8))
        }
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

func seconds(since start: ContinuousClock.Instant) -> Double {
    (ContinuousClock.now - start).seconds
}
