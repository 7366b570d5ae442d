import APNs
import Durations
import Foundation

/// The APNs benchmark workload: content-free signals through ``APNsClient`` to a gateway, and the pieces the
/// baselines need to send exactly the same requests (payload bytes, headers, a provider token).
enum APNsBenchmarks {
    /// The signal every benchmark notification carries: a badge, `content-available`, an alias and a state tag.
    static func signal() throws -> ContentFreeSignal {
        try ContentFreeSignal(badge: 3, alias: "bench-alias-0001", tag: "Qk3xY0_bench-tag")
    }

    /// A fixed `apns-expiration` (1 January 2100), so every client sends identical headers.
    static let expiration = APNsExpiration.at(unixSeconds: 4_102_444_800)

    /// Device tokens from a file (one 64-hex token per line), or one fixed token when `path` is `nil`.
    static func deviceTokens(path: String?) throws -> [DeviceToken] {
        guard let path else { return [try DeviceToken(String(repeating: "ab", count: 32))] }
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(whereSeparator: \.isNewline)
        let tokens = try lines.map { line throws(APNsValidationError) in
            try DeviceToken(line.trimmingCharacters(in: .whitespaces))
        }
        guard !tokens.isEmpty else { throw BenchError("no device tokens in \(path)") }
        return tokens
    }

    /// Prints the payload and the `apns-*` headers of one benchmark notification as JSON (authorization excluded),
    /// so a baseline client can send the same bytes.
    static func describe(topic: String) throws {
        let notification = try APNsNotification(
            deviceToken: try deviceTokens(path: nil)[0], signal: try signal(), topic: try APNsTopic(topic),
            expiration: expiration)
        let headers = notification.headers(now: Date()).filter { $0.name != "apns-id" }
            .map { #""\#($0.name)":"\#($0.value)""# }.joined(separator: ",")
        let payload = String(decoding: notification.signal.payload, as: UTF8.self)
        let escaped = payload.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        TransportBenchmarks.emit(#"{"payload":"\#(escaped)","headers":{\#(headers)}}"#)
    }

    /// Prints one provider token (a JWT ES256) for the key.
    static func providerToken(keyFile: String, keyID: String, teamID: String) throws {
        let key = try APNsSigningKey(p8File: keyFile, keyID: keyID, teamID: teamID)
        TransportBenchmarks.emit(try key.makeToken(issuedAt: Date()).value)
    }

    /// Sends `count` notifications through one ``APNsClient`` (one HTTP/2 connection), `concurrency` at a time,
    /// after a warm-up, and prints the rate as JSON.
    static func load(
        url: String, caFile: String?, keyFile: String, keyID: String, teamID: String, topic: String,
        tokensFile: String?, count: Int, concurrency: Int, warmup: Int, diagnose: Bool
    ) async throws {
        let key = try APNsSigningKey(p8File: keyFile, keyID: keyID, teamID: teamID)
        let client = APNsClient(
            configuration: .init(
                endpoint: .custom(url: url, caFile: caFile),
                authentication: .token(ProviderTokenManager(signingKey: key)),
                maximumConcurrentStreams: max(concurrency, 1)))
        defer { client.shutdown() }
        let tokens = try deviceTokens(path: tokensFile)
        let signal = try signal()
        let topic = try APNsTopic(topic)
        let make: @Sendable (Int) -> APNsNotification = { index in
            // Cannot fail: the signal is an alert (badge) signal and the expiration is valid.
            try! APNsNotification(
                deviceToken: tokens[index % tokens.count], signal: signal, topic: topic, expiration: expiration)
        }
        if warmup > 0 {
            let warm = await client.benchmark(count: warmup, concurrency: concurrency, makeNotification: make)
            guard warm.succeeded > 0 else { throw BenchError("warm-up: every notification failed") }
        }
        if diagnose {
            try await tallyFailures(client: client, count: count, concurrency: concurrency, make: make)
            return
        }
        let result = await client.benchmark(count: count, concurrency: concurrency, makeNotification: make)
        TransportBenchmarks.emit(
            #"{"benchmark":"apnsclient-load","notifications":\#(result.count),"succeeded":\#(result.succeeded),"#
                + #""failed":\#(result.failed),"concurrency":\#(concurrency),"#
                + #""seconds":\#(String(format: "%.3f", result.elapsed.seconds)),"#
                + #""rate":\#(String(format: "%.1f", result.rate)),"connections":\#(client.connectionsOpened)}"#)
    }
}

extension APNsBenchmarks {
    /// Sends like ``APNsClient/benchmark(count:concurrency:makeNotification:)`` but prints every distinct
    /// failure with its count (for investigating failed sends).
    static func tallyFailures(
        client: APNsClient, count: Int, concurrency: Int, make: @escaping @Sendable (Int) -> APNsNotification
    ) async throws {
        let failures = await withTaskGroup(of: [String: Int].self) { group in
            for worker in 0..<max(1, min(concurrency, count)) {
                group.addTask {
                    var seen: [String: Int] = [:]
                    for index in stride(from: worker, to: count, by: concurrency) {
                        do {
                            _ = try await client.send(make(index))
                        } catch {
                            seen["\(error)", default: 0] += 1
                        }
                    }
                    return seen
                }
            }
            var all: [String: Int] = [:]
            for await seen in group { all.merge(seen, uniquingKeysWith: +) }
            return all
        }
        for (failure, times) in failures.sorted(by: { $0.value > $1.value }) {
            TransportBenchmarks.emit("\(times)× \(failure)")
        }
        TransportBenchmarks.emit("\(failures.values.reduce(0, +)) of \(count) failed")
    }
}
