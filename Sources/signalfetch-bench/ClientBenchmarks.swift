import Foundation
import HTTPClient

/// The HTTPClient load loop of the transport benchmarks.
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
        let request = HTTPRequest(url: url)
        // Warm-up: open the connection and let both sides settle.
        _ = try await run(client: client, request: request, count: warmup, concurrency: concurrency)
        let start = ContinuousClock.now
        let (ok, failed) = try await run(client: client, request: request, count: count, concurrency: concurrency)
        let elapsed = seconds(since: start)
        let rate = Double(count) / elapsed
        TransportBenchmarks.emit(
            #"{"benchmark":"httpclient-load","requests":\#(count),"ok":\#(ok),"failed":\#(failed),"#
                + #""concurrency":\#(concurrency),"seconds":\#(String(format: "%.3f", elapsed)),"#
                + #""rate":\#(String(format: "%.1f", rate)),"connections":\#(client.connectionsOpened)}"#)
    }

    private static func run(
        client: HTTPClient, request: HTTPRequest, count: Int, concurrency: Int
    ) async throws -> (Int, Int) {
        let workers = max(1, min(concurrency, count))
        return await withTaskGroup(of: (Int, Int).self) { group in
            for worker in 0..<workers {
                group.addTask {
                    var ok = 0
                    var failed = 0
                    for _ in stride(from: worker, to: count, by: workers) {
                        do {
                            let response = try await client.execute(request)
                            if response.status == 200 { ok += 1 } else { failed += 1 }
                        } catch {
                            failed += 1
                        }
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
