import CommandLineSupport
import Foundation
import HTTP2Client
import HTTPClient

/// The client load loops of the transport benchmarks: HTTPClient (libcurl) and HTTP2Client (nghttp2).
enum ClientBenchmarks {
    /// Sends `count` GET requests to `url`, `concurrency` at a time, over one HTTPClient (one HTTP/2 connection
    /// unless HTTP/1.1 is asked for) and prints the rate as JSON.
    static func clientLoad(
        url: String, caFile: String?, count: Int, concurrency: Int, http1: Bool, warmup: Int
    ) async throws {
        let client = HTTPClient(
            configuration: .init(
                httpVersion: http1 ? .http1 : .http2, tls: TLSConfiguration(caFile: caFile),
                maximumConcurrentStreams: max(100, concurrency)))
        defer { client.shutdown() }
        let request = HTTPClient.Request(url: url)
        let send: @Sendable () async -> Bool = {
            (try? await client.execute(request))?.status == 200
        }
        try await measure("httpclient-load", count: count, concurrency: concurrency, warmup: warmup, send: send) {
            client.connectionsOpened
        }
    }

    /// The same load through an ``HTTP2Client``: `url` is split into its origin and path.
    static func http2ClientLoad(url: String, caFile: String?, count: Int, concurrency: Int, warmup: Int) async throws {
        guard let components = URLComponents(string: url), let scheme = components.scheme, let host = components.host
        else { throw UsageError("--url must be an absolute http(s) URL") }
        let port = components.port.map { ":\($0)" } ?? ""
        let client = HTTP2Client(
            configuration: .init(
                baseURL: "\(scheme)://\(host)\(port)", tls: .init(caFile: caFile),
                maximumConcurrentStreams: max(100, concurrency)))
        defer { client.shutdown() }
        let request = HTTP2Client.Request(path: components.path.isEmpty ? "/" : components.path)
        let send: @Sendable () async -> Bool = {
            (try? await client.execute(request))?.status == 200
        }
        try await measure("http2client-load", count: count, concurrency: concurrency, warmup: warmup, send: send) {
            client.connectionsOpened
        }
    }

    private static func measure(
        _ name: String, count: Int, concurrency: Int, warmup: Int, send: @escaping @Sendable () async -> Bool,
        connections: () -> Int
    ) async throws {
        // Warm-up: open the connection and let both sides settle.
        _ = await run(count: warmup, concurrency: concurrency, send: send)
        let start = ContinuousClock.now
        let (ok, failed) = await run(count: count, concurrency: concurrency, send: send)
        let elapsed = seconds(since: start)
        let rate = Double(count) / elapsed
        TransportBenchmarks.emit(
            #"{"benchmark":"\#(name)","requests":\#(count),"ok":\#(ok),"failed":\#(failed),"#
                + #""concurrency":\#(concurrency),"seconds":\#(String(format: "%.3f", elapsed)),"#
                + #""rate":\#(String(format: "%.1f", rate)),"connections":\#(connections())}"#)
    }

    private static func run(
        count: Int, concurrency: Int, send: @escaping @Sendable () async -> Bool
    ) async -> (Int, Int) {
        let workers = max(1, min(concurrency, count))
        return await withTaskGroup(of: (Int, Int).self) { group in
            for worker in 0..<workers {
                group.addTask {
                    var ok = 0
                    var failed = 0
                    for _ in stride(from: worker, to: count, by: workers) {
                        if await send() { ok += 1 } else { failed += 1 }
                    }
                    return (ok, failed)
                }
            }
            var totals = (0, 0)
            for await (ok, failed) in group {
                totals.0 += ok
                totals.1 += failed
            }
            return totals
        }
    }
}
