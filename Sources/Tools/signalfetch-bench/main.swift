import CommandLineSupport
import Foundation
import OpenSSLCrypto
import SQLiteKit

// Before anything uses OpenSSL: no exit-time cleanup under threads still using it.
OpenSSLProcess.keepUntilExit()

let usage = """
    signalfetch-bench — benchmark and drill workloads for SignalFetch (driven by Scripts/bench and the tests)

    USAGE:
      signalfetch-bench sqlite [--rows N] [--batch N] [--dir DIR]   SQLiteKit vs direct sqlite3 inserts (JSON)
      signalfetch-bench sqlite-crash-writer --db PATH               insert forever, print committed ids
      signalfetch-bench store [--count N] [--large N] [--dir DIR] [--changes-only]   group commit vs single transactions, changes and JMAP sync cost
      signalfetch-bench signin [--count N] [--rate N] [--dir DIR]   sign-in latency alone and while N deliveries/s run
      signalfetch-bench stream-accounts --db PATH [--prefix P] [--count N]
                                              N accounts with a session each, made in the store; prints
                                              "USERNAME TOKEN" lines (the held-stream benches)
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
      signalfetch-bench roundtrips --ca PEM --sides FILE
                                              the JMAP round-trip bench's client: WebSocket and keep-alive
                                              HTTPS sides held open, COUNT round trips per "NAME COUNT" line
      signalfetch-bench wsholder              the JMAP WebSocket fan-out bench's sockets, on one epoll loop
                                              (its configuration and commands on standard input, JSON lines)
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
        let figure = Figure(
            "sqlite-insert", title: "SQLiteKit inserts vs direct sqlite3 C calls", unit: "rows/s",
            ours: ("SQLiteKit", (kit.max() ?? 0).rounded()), baseline: ("sqlite3 C API", (raw.max() ?? 0).rounded()),
            goal: 0.8, details: ["rows": .integer(rows), "batch": .integer(batch)])
        print(figure.json)
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
        let figures = try await StoreBenchmarks.figures(
            count: count, large: large, changesOnly: arguments.flag("changes-only"), fresh: fresh)
        for figure in figures { print(figure.json) }
    case "signin":
        let dir = arguments.string("dir") ?? NSTemporaryDirectory()
        let path = "\(dir)/bench-signin-\(UUID().uuidString.prefix(8)).sqlite"
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let rate = Double(try arguments.int("rate", default: 50))
        let result = try await SignInBenchmarks.run(
            path: path, signIns: try arguments.int("count", default: 20), deliveriesPerSecond: rate)
        print(result.figure(deliveriesPerSecondTarget: rate).json)
        print(result.deliveryFigure.json)
    case "stream-accounts":
        try await StreamAccounts.seed(
            path: try arguments.required("db"), prefix: arguments.string("prefix") ?? "stream",
            count: try arguments.int("count", default: 1_000))
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
    case "roundtrips":
        try RoundTripClient.run(caFile: try arguments.required("ca"), sidesFile: try arguments.required("sides"))
    case "wsholder":
        try FanoutHolder.run()
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
