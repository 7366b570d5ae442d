import Foundation
import SQLiteKit
import TestSupport
import Testing

@Suite struct CrashSafetyTests {
    /// A child process commits rows in a loop and reports each committed id; it is SIGKILLed mid-transaction.
    /// Every reported row must survive and the file must pass `integrity_check`.
    @Test func sigkilledWriterLosesNoCommittedRow() throws {
        let dir = try TemporaryDirectory()
        let path = dir.path("crash.sqlite")
        for round in 0..<3 {
            let process = Process()
            process.executableURL = TestEnvironment.executable("signalfetch-bench")
            process.arguments = ["sqlite-crash-writer", "--db", path]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            var reported = [Int64]()
            var buffer = Data()
            let handle = output.fileHandleForReading
            // Read until the child has reported enough commits, then kill it while it is writing.
            while reported.count < 500 * (round + 1) {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                while let newline = buffer.firstIndex(of: 0x0a) {
                    let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                    buffer.removeSubrange(buffer.startIndex...newline)
                    if let id = Int64(line) { reported.append(id) }
                }
            }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            #expect(process.terminationReason == .uncaughtSignal)
            try #require(reported.count >= 500)

            let pool = try DatabasePool(path: path)
            #expect(try pool.read { try $0.integrityCheck() } == "ok")
            let present = Set(try pool.read { db in try db.query("SELECT id FROM items").compactMap { $0[0].int64 } })
            let missing = reported.filter { !present.contains($0) }
            #expect(missing.isEmpty, "committed rows lost after SIGKILL: \(missing.prefix(10))")
        }
    }
}
