import CommandLineSupport
import Foundation
import SQLiteKit

let usage = """
    signalfetch-bench — benchmark and drill workloads for SignalFetch (driven by Scripts/bench and the tests)

    USAGE:
      signalfetch-bench sqlite [--rows N] [--batch N] [--dir DIR]   SQLiteKit vs direct sqlite3 inserts (JSON)
      signalfetch-bench sqlite-crash-writer --db PATH               insert forever, print committed ids
      signalfetch-bench store [--count N] [--large N] [--dir DIR] [--changes-only]   group commit vs single transactions, changes and JMAP sync cost
      signalfetch-bench signin [--count N] [--rate N] [--dir DIR]   sign-in latency alone and while N deliveries/s run
      signalfetch-bench store-crash-writer --db PATH                deliver forever, print acknowledged ids
      signalfetch-bench serve-http [--port N] [--tls-cert F --tls-key F] [--threads N]
                                              HTTPServer serving a tiny JSON document; prints {"port":N}
      signalfetch-bench serve-h2 [--port N] [--tls-cert F --tls-key F] [--async] [--post-body TEXT]
                                              HTTP2Server: GET → tiny JSON, POST → 200 with apns-id (h2c
                                              without TLS files); prints {"port":N}
      signalfetch-bench client-load --url URL [--ca PEM] [--count N] [--concurrency N] [--http1] [--warmup N]
                                              HTTPClient requests over one connection; prints the rate (JSON)
      signalfetch-bench h2client-load --url URL [--ca PEM] [--count N] [--concurrency N] [--warmup N]
                                              the same through HTTP2Client (nghttp2)
      signalfetch-bench apns-load --url URL [--ca PEM] --key P8 --key-id ID --team-id ID --topic T
                                  [--tokens FILE] [--count N] [--concurrency N] [--warmup N] [--diagnose]
                                              APNsClient notifications over one connection; prints the rate
      signalfetch-bench fcm-load --endpoint URL [--token-uri URL] [--ca PEM] --service-account JSON
                                 --tokens FILE [--app ID] [--count N] [--concurrency N] [--warmup N]
                                              mailboxd's FCM sender (OAuth, one HTTP/2 connection); the rate
      signalfetch-bench webpush-load --subscriptions FILE --vapid-key PEM [--ca PEM] [--allow-host H:P]…
                                     [--count N] [--concurrency N] [--warmup N]
                                              mailboxd's Web Push sender (RFC 8291, VAPID, HTTP/2); the rate
      signalfetch-bench webpush-encrypt [--count N]   one Web Push body's encryption, in µs (JSON)
      signalfetch-bench apns-describe --topic T   the benchmark notification's payload and headers (JSON)
      signalfetch-bench devices --sim HOST:PORT --count N [--topic T] [--tokens-out FILE]
                                              apns-sim devices that hold their notification streams and count
                                              every event (JSON lines: ready, then events on SIGTERM)
      signalfetch-bench jwt --key P8 --key-id ID --team-id ID      one provider token
      signalfetch-bench locks [--operations N] [--rounds N]        LockedValue vs Synchronization.Mutex (JSON)
    """

await runCommand(usage: usage) {
    let arguments = try Arguments(
        Array(CommandLine.arguments.dropFirst()), switches: ["help", "http1", "async", "diagnose", "changes-only"],
        environmentPrefix: "SIGNALFETCH_BENCH_")
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
        // Batch by batch in turns (see interleavedInsertRates), three rounds, best of each side.
        var kit: [Double] = []
        var raw: [Double] = []
        for round in 0..<3 {
            let rates = try SQLiteBenchmarks.interleavedInsertRates(
                kitPath: kitPath + "\(round)", rawPath: rawPath + "\(round)", rows: rows, batch: batch)
            kit.append(rates.kit)
            raw.append(rates.raw)
            for path in [kitPath + "\(round)", rawPath + "\(round)"] {
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            }
        }
        let best = (kit: kit.max()!, raw: raw.max()!)
        print(
            #"{"benchmark":"sqlite-insert","rows":\#(rows),"batch":\#(batch),"sqlitekit_rows_per_s":\#(Int(best.kit)),"raw_c_rows_per_s":\#(Int(best.raw)),"ratio":\#(String(format: "%.3f", best.kit / best.raw))}"#
        )
    case "locks":
        let records = LockBenchmarks.run(
            operations: try arguments.int("operations", default: 2_000_000),
            rounds: try arguments.int("rounds", default: 5))
        for record in records { print(record) }
    case "store":
        let count = try arguments.int("count", default: 2_000)
        let large = try arguments.int("large", default: 1_000_000)
        let dir = arguments.string("dir") ?? NSTemporaryDirectory()
        var paths: [String] = []
        func fresh(_ name: String) -> String {
            let path = "\(dir)/bench-\(name)-\(UUID().uuidString.prefix(8)).sqlite"
            paths.append(path)
            return path
        }
        defer {
            for path in paths {
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            }
        }
        var fields: [String] = [#""benchmark":"store""#, #""deliveries":\#(count)"#, #""producers":8"#]
        // `--changes-only`: only the sync costs (changes and JMAP), for profiling them.
        if !arguments.flag("changes-only") {
            for mode in [SynchronousMode.normal, .full] {
                // Two interleaved measurements (see deliveryRates), the best of each side.
                var single = 0.0
                var grouped = 0.0
                var runs: [StoreBenchmarks.DeliveryRates] = []
                for _ in 0..<2 {
                    let rates = try await StoreBenchmarks.deliveryRates(
                        groupPath: fresh("group"), singlePath: fresh("single"), synchronous: mode, count: count,
                        producers: 8)
                    grouped = max(grouped, rates.group)
                    single = max(single, rates.single)
                    runs.append(rates)
                }
                let name = mode.rawValue.lowercased()
                fields.append(#""\#(name)_group_commit_per_s":\#(Int(grouped))"#)
                fields.append(#""\#(name)_single_tx_per_s":\#(Int(single))"#)
                fields.append(#""\#(name)_ratio":\#(String(format: "%.2f", grouped / single))"#)
                // What the commit alone allows: at most 8 deliveries share one COMMIT, so the ratio cannot pass
                // 8 × (a whole one-message transaction) / (the store's COMMIT), whatever the rest costs.
                let perTransaction = Double(count * runs.count) / Double(max(1, runs.map(\.batches).reduce(0, +)))
                let groupCommit = runs.map(\.groupCommit).reduce(0, +) / Double(runs.count)
                let singleCommit = runs.map(\.singleCommit).reduce(0, +) / Double(runs.count)
                let bound = runs.map { 8 / $0.single / $0.groupCommit }.max() ?? 0
                // And with the machinery's cost when nothing is written (producers' turnaround, hand-offs, one read per
                // write) added to the commit: the ratio if inserting a message cost no more than reading one.
                let machinery = runs.map(\.machinery).reduce(0, +) / Double(runs.count)
                let ceiling = runs.map { 8 / $0.single / ($0.groupCommit + $0.machinery) }.max() ?? 0
                fields.append(#""\#(name)_deliveries_per_tx":\#(String(format: "%.2f", perTransaction))"#)
                fields.append(#""\#(name)_group_commit_us":\#(Int(groupCommit * 1e6))"#)
                fields.append(#""\#(name)_single_commit_us":\#(Int(singleCommit * 1e6))"#)
                fields.append(#""\#(name)_single_tx_us":\#(Int(1e6 / single))"#)
                fields.append(#""\#(name)_ratio_bound":\#(String(format: "%.2f", bound))"#)
                fields.append(#""\#(name)_machinery_us":\#(Int(machinery * 1e6))"#)
                fields.append(#""\#(name)_ratio_ceiling":\#(String(format: "%.2f", ceiling))"#)
            }
            // 64 producers, as many as an MTA's LMTP sessions and a crowd of senders bring: at FULL against one
            // transaction per message, and against the same producers at OFF (no fsync: the CPU-bound ceiling), the
            // two sides interleaved as above.
            var full64: [StoreBenchmarks.DeliveryRates] = []
            var off64: [StoreBenchmarks.DeliveryRates] = []
            for _ in 0..<2 {
                full64.append(
                    try await StoreBenchmarks.deliveryRates(
                        groupPath: fresh("group64"), singlePath: fresh("single64"), synchronous: .full, count: count,
                        producers: 64))
                off64.append(
                    try await StoreBenchmarks.deliveryRates(
                        groupPath: fresh("group64off"), singlePath: fresh("single64off"), synchronous: .off,
                        count: count,
                        producers: 64))
            }
            let grouped64 = full64.map(\.group).max() ?? 0
            let single64 = full64.map(\.single).max() ?? 1
            let off64Rate = off64.map(\.group).max() ?? 1
            fields.append(#""full64_group_commit_per_s":\#(Int(grouped64))"#)
            fields.append(#""full64_single_tx_per_s":\#(Int(single64))"#)
            fields.append(#""full64_ratio":\#(String(format: "%.2f", grouped64 / single64))"#)
            fields.append(#""off64_group_commit_per_s":\#(Int(off64Rate))"#)
            fields.append(#""full64_vs_off_ratio":\#(String(format: "%.3f", grouped64 / off64Rate))"#)
            let batches64 = full64.map(\.batches).reduce(0, +)
            fields.append(
                #""full64_deliveries_per_tx":\#(String(format: "%.1f", Double(count * full64.count) / Double(max(1, batches64))))"#
            )
            fields.append(
                #""full64_group_commit_us":\#(Int(full64.map(\.groupCommit).reduce(0, +) / Double(full64.count) * 1e6))"#
            )
        }
        let smallMailbox = try await StoreBenchmarks.changesFixture(path: fresh("small"), size: 1_000)
        let largeMailbox = try await StoreBenchmarks.changesFixture(path: fresh("large"), size: large)
        let (small, big) = try await StoreBenchmarks.changesLatency(small: smallMailbox, large: largeMailbox)
        fields.append(#""changes_ms_1k":\#(String(format: "%.3f", small))"#)
        fields.append(#""changes_ms_large":\#(String(format: "%.3f", big))"#)
        fields.append(#""large_mailbox":\#(large)"#)
        fields.append(#""changes_ratio":\#(String(format: "%.2f", big / small))"#)
        let sync = try await JMAPBenchmarks.syncLatency(small: smallMailbox, large: largeMailbox)
        fields.append(#""jmap_sync_ms_1k":\#(String(format: "%.3f", sync.jmapSmall))"#)
        fields.append(#""jmap_sync_ms_large":\#(String(format: "%.3f", sync.jmapLarge))"#)
        fields.append(#""jmap_sync_ratio":\#(String(format: "%.2f", sync.jmapLarge / sync.jmapSmall))"#)
        fields.append(#""v1_sync_ms_1k":\#(String(format: "%.3f", sync.v1Small))"#)
        fields.append(#""jmap_vs_v1":\#(String(format: "%.2f", sync.v1Small / sync.jmapSmall))"#)
        print("{" + fields.joined(separator: ",") + "}")
    case "signin":
        let dir = arguments.string("dir") ?? NSTemporaryDirectory()
        let path = "\(dir)/bench-signin-\(UUID().uuidString.prefix(8)).sqlite"
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let rate = Double(try arguments.int("rate", default: 50))
        let result = try await SignInBenchmarks.run(
            path: path, signIns: try arguments.int("count", default: 20), deliveriesPerSecond: rate)
        func percentile(_ values: [Double], _ p: Double) -> Double {
            let sorted = values.sorted()
            return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
        }
        let idle50 = percentile(result.idle, 0.5)
        let loaded50 = percentile(result.loaded, 0.5)
        print(
            #"{"benchmark":"signin-under-load","deliveries_per_s_target":\#(Int(rate)),"#
                + #""deliveries_per_s":\#(String(format: "%.1f", Double(result.deliveries) / result.seconds)),"#
                + #""signin_ms_idle_p50":\#(String(format: "%.2f", idle50)),"#
                + #""signin_ms_idle_p90":\#(String(format: "%.2f", percentile(result.idle, 0.9))),"#
                + #""signin_ms_loaded_p50":\#(String(format: "%.2f", loaded50)),"#
                + #""signin_ms_loaded_p90":\#(String(format: "%.2f", percentile(result.loaded, 0.9))),"#
                + #""ratio":\#(String(format: "%.2f", loaded50 / idle50))}"#)
    case "store-crash-writer":
        try await StoreBenchmarks.crashWriter(path: try arguments.required("db"))
    case "sqlite-crash-writer":
        try SQLiteBenchmarks.crashWriter(path: try arguments.required("db"))
    case "serve-http":
        try await TransportBenchmarks.serveHTTP(
            port: try arguments.int("port", default: 0), certificate: arguments.string("tls-cert"),
            key: arguments.string("tls-key"),
            threads: arguments.string("threads").map { _ in try arguments.int("threads", default: 2) })
    case "serve-h2":
        try await TransportBenchmarks.serveHTTP2(
            port: try arguments.int("port", default: 0), certificate: arguments.string("tls-cert"),
            key: arguments.string("tls-key"), asyncHandler: arguments.flag("async"),
            postBody: arguments.string("post-body"))
    case "client-load":
        try await ClientBenchmarks.clientLoad(
            url: try arguments.required("url"), caFile: arguments.string("ca"),
            count: try arguments.int("count", default: 20_000),
            concurrency: try arguments.int("concurrency", default: 100),
            http1: arguments.flag("http1"), warmup: try arguments.int("warmup", default: 1_000))
    case "h2client-load":
        try await ClientBenchmarks.http2ClientLoad(
            url: try arguments.required("url"), caFile: arguments.string("ca"),
            count: try arguments.int("count", default: 20_000),
            concurrency: try arguments.int("concurrency", default: 100),
            warmup: try arguments.int("warmup", default: 1_000))
    case "apns-load":
        try await APNsBenchmarks.load(
            url: try arguments.required("url"), caFile: arguments.string("ca"), keyFile: try arguments.required("key"),
            keyID: try arguments.required("key-id"), teamID: try arguments.required("team-id"),
            topic: try arguments.required("topic"), tokensFile: arguments.string("tokens"),
            count: try arguments.int("count", default: 20_000),
            concurrency: try arguments.int("concurrency", default: 100),
            warmup: try arguments.int("warmup", default: 1_000), diagnose: arguments.flag("diagnose"))
    case "fcm-load":
        try await FCMBenchmarks.load(
            endpoint: try arguments.required("endpoint"), tokenURI: arguments.string("token-uri"),
            caFile: arguments.string("ca"), serviceAccountFile: try arguments.required("service-account"),
            app: arguments.string("app") ?? "com.example.signalfetch", tokensFile: try arguments.required("tokens"),
            count: try arguments.int("count", default: 20_000),
            concurrency: try arguments.int("concurrency", default: 100),
            warmup: try arguments.int("warmup", default: 1_000))
    case "webpush-load":
        try await WebPushBenchmarks.load(
            subscriptionsFile: try arguments.required("subscriptions"),
            vapidKeyFile: try arguments.required("vapid-key"), caFile: arguments.string("ca"),
            allowedHosts: arguments.all("allow-host"), count: try arguments.int("count", default: 20_000),
            concurrency: try arguments.int("concurrency", default: 100),
            warmup: try arguments.int("warmup", default: 1_000))
    case "webpush-encrypt":
        try WebPushBenchmarks.encryption(count: try arguments.int("count", default: 20_000))
    case "apns-describe":
        try APNsBenchmarks.describe(topic: try arguments.required("topic"))
    case "devices":
        try DeviceBenchmarks.run(
            sim: try arguments.required("sim"), count: try arguments.int("count", default: 1_000),
            topic: arguments.string("topic") ?? "com.example.signalfetch", tokensOut: arguments.string("tokens-out"))
    case "jwt":
        try APNsBenchmarks.providerToken(
            keyFile: try arguments.required("key"), keyID: try arguments.required("key-id"),
            teamID: try arguments.required("team-id"))
    default:
        throw UsageError("unknown command \(arguments.positionals[0])")
    }
}
