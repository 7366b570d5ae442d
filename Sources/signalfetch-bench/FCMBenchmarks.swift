import Foundation
import Push
import PushFCM

/// The FCM benchmark workload: content-free signals through mailboxd's own FCM sender (``FCMPushService``: the
/// OAuth token, one multiplexed HTTP/2 connection, the payload guard, the answer's classification) to fcm-sim or
/// a bare HTTP/2 endpoint.
enum FCMBenchmarks {
    /// Sends `count` background signals, `concurrency` at a time, spread over the registration tokens in
    /// `tokensFile` (one per line), and prints the accepted rate as JSON.
    static func load(
        endpoint: String, tokenURI: String?, caFile: String?, serviceAccountFile: String, app: String,
        tokensFile: String, count: Int, concurrency: Int, warmup: Int
    ) async throws {
        let account = try GoogleServiceAccount(file: serviceAccountFile)
        let service = FCMPushService(
            configuration: FCMConfiguration(
                endpoint: endpoint, tokenURI: tokenURI, caFile: caFile,
                apps: [.init(app: app, serviceAccount: account, signalKind: .background)]))
        defer { service.shutdown() }
        let tokens = try String(contentsOfFile: tokensFile, encoding: .utf8).split(whereSeparator: \.isNewline)
            .map(String.init).filter { !$0.isEmpty }
        guard !tokens.isEmpty else { throw BenchError("no registration tokens in \(tokensFile)") }
        let signal = try PushSignal(
            alias: try DeviceAlias("bench-alias-0001"), tag: try StateTag("Qk3xY0_bench-tag"), badge: nil)
        let addresses = tokens.map { PushAddress(service: .fcm, token: $0, app: app) }
        if warmup > 0 {
            let warm = await run(service, signal, addresses, count: warmup, concurrency: concurrency)
            guard warm.delivered > 0 else { throw BenchError("warm-up: every signal failed: \(warm.failures)") }
        }
        let start = ContinuousClock.now
        let result = await run(service, signal, addresses, count: count, concurrency: concurrency)
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let failures = result.failures.sorted { $0.key < $1.key }.map { #""\#($0.key)":\#($0.value)"# }
        TransportBenchmarks.emit(
            #"{"benchmark":"fcm-load","signals":\#(count),"succeeded":\#(result.delivered),"#
                + #""failed":\#(count - result.delivered),"concurrency":\#(concurrency),"#
                + #""seconds":\#(String(format: "%.3f", seconds)),"#
                + #""rate":\#(String(format: "%.1f", Double(result.delivered) / seconds)),"#
                + #""connections":\#(service.connectionsOpened),"failures":{\#(failures.joined(separator: ","))}}"#)
    }

    private static func run(
        _ service: FCMPushService, _ signal: PushSignal, _ addresses: [PushAddress], count: Int, concurrency: Int
    ) async -> (delivered: Int, failures: [String: Int]) {
        await withTaskGroup(of: (Int, [String: Int]).self) { group in
            for worker in 0..<max(1, min(concurrency, count)) {
                group.addTask {
                    var delivered = 0
                    var failures: [String: Int] = [:]
                    for index in stride(from: worker, to: count, by: max(1, concurrency)) {
                        switch await service.send(signal, to: addresses[index % addresses.count]) {
                        case .delivered: delivered += 1
                        case .retry(let reason, _), .defect(let reason), .dropRegistration(let reason, _):
                            failures[reason, default: 0] += 1
                        }
                    }
                    return (delivered, failures)
                }
            }
            var total = (delivered: 0, failures: [String: Int]())
            for await (delivered, failures) in group {
                total.delivered += delivered
                total.failures.merge(failures, uniquingKeysWith: +)
            }
            return total
        }
    }
}
