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
        try await PushServiceLoad.measure(
            "fcm-load", service, signal, addresses, count: count, concurrency: concurrency, warmup: warmup,
            connections: { service.connectionsOpened })
    }
}
