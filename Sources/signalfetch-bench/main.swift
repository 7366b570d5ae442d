import CommandLineSupport
import Foundation

let usage = """
    signalfetch-bench — benchmark and drill workloads for SignalFetch (driven by Scripts/bench and the tests)

    USAGE:
      signalfetch-bench sqlite [--rows N] [--batch N] [--dir DIR]   SQLiteKit vs direct sqlite3 inserts (JSON)
      signalfetch-bench sqlite-crash-writer --db PATH               insert forever, print committed ids
    """

await runCommand(usage: usage) {
    let arguments = try Arguments(
        Array(CommandLine.arguments.dropFirst()), switches: ["help"], environmentPrefix: "SIGNALFETCH_BENCH_")
    if arguments.wantsHelp || arguments.positionals.isEmpty {
        print(usage)
        return
    }
    switch arguments.positionals[0] {
    case "sqlite":
        let rows = try arguments.int("rows", default: 200_000)
        let batch = try arguments.int("batch", default: 1_000)
        let dir = arguments.string("dir") ?? NSTemporaryDirectory()
        let id = UUID().uuidString.prefix(8)
        let kitPath = "\(dir)/bench-kit-\(id).sqlite"
        let rawPath = "\(dir)/bench-raw-\(id).sqlite"
        defer {
            for path in [kitPath, rawPath] {
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            }
        }
        // Alternate and keep the best of three, so a noisy moment does not decide the ratio.
        var kit: [Double] = []
        var raw: [Double] = []
        for round in 0..<3 {
            raw.append(try SQLiteBenchmarks.rawCInsertRate(path: rawPath + "\(round)", rows: rows, batch: batch))
            kit.append(try SQLiteBenchmarks.sqliteKitInsertRate(path: kitPath + "\(round)", rows: rows, batch: batch))
            for path in [kitPath + "\(round)", rawPath + "\(round)"] {
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            }
        }
        let best = (kit: kit.max()!, raw: raw.max()!)
        print(
            #"{"benchmark":"sqlite-insert","rows":\#(rows),"batch":\#(batch),"sqlitekit_rows_per_s":\#(Int(best.kit)),"raw_c_rows_per_s":\#(Int(best.raw)),"ratio":\#(String(format: "%.3f", best.kit / best.raw))}"#
        )
    case "sqlite-crash-writer":
        try SQLiteBenchmarks.crashWriter(path: try arguments.required("db"))
    default:
        throw UsageError("unknown command \(arguments.positionals[0])")
    }
}
