import Durations
import Foundation
import OpenSSLCrypto
import Push
import PushWebPush

/// The Web Push benchmark workloads: content-free signals through mailboxd's own sender (``WebPushPushService``:
/// RFC 8291 encryption with a fresh key per message, a VAPID token per origin, one HTTP/2 connection per push
/// service) to webpush-sim; and the cost of one message's encryption alone.
enum WebPushBenchmarks {
    /// One subscription, as `webpush-sim`'s `POST /sim/subscriptions` answers it.
    struct Subscription: Decodable {
        var endpoint: String
        var keys: [String: String]
    }

    /// Sends `count` signals, `concurrency` at a time, spread over the subscriptions in `subscriptionsFile` (one
    /// `PushSubscription.toJSON()` per line) and prints the accepted rate as JSON.
    static func load(
        subscriptionsFile: String, vapidKeyFile: String, caFile: String?, allowedHosts: [String], count: Int,
        concurrency: Int, warmup: Int
    ) async throws {
        let policy = WebPushEndpointPolicy(allowedHosts: allowedHosts)
        let service = try WebPushPushService(
            configuration: try WebPushConfiguration(
                vapidKey: try WebPushConfiguration.vapidKey(file: vapidKeyFile), subject: "mailto:bench@example.com",
                caFile: caFile, endpointPolicy: policy, signalKind: .background))
        defer { service.shutdown() }
        let lines = try String(contentsOfFile: subscriptionsFile, encoding: .utf8).split(whereSeparator: \.isNewline)
        var addresses: [PushAddress] = []
        for line in lines where !line.isEmpty {
            let subscription = try JSONDecoder().decode(Subscription.self, from: Data(line.utf8))
            addresses.append(
                try service.address(
                    for: DeviceRegistration(
                        service: .webpush,
                        fields: [
                            "subscription.endpoint": subscription.endpoint,
                            "subscription.keys.p256dh": subscription.keys["p256dh"] ?? "",
                            "subscription.keys.auth": subscription.keys["auth"] ?? "",
                        ])))
        }
        guard !addresses.isEmpty else { throw BenchError("no subscriptions in \(subscriptionsFile)") }
        let signal = try PushSignal(
            alias: try DeviceAlias("bench-alias-0001"), tag: try StateTag("Qk3xY0_bench-tag"), badge: nil)
        try await PushServiceLoad.measure(
            "webpush-load", service, signal, addresses, count: count, concurrency: concurrency, warmup: warmup,
            connections: { service.connectionsOpened })
    }

    /// The cost of one signal's body: a fresh P-256 key, ECDH with the subscription's key, the HKDF steps and
    /// AES-128-GCM over the padded 256-byte body, on one thread; prints microseconds per message.
    static func encryption(count: Int) throws {
        let receiver = try P256PrivateKey()
        let receiverPublic = try receiver.publicKey
        let auth = SecureRandom.bytes(16)
        let plaintext = Array(#"{"acct":"bench-alias-0001","st":"Qk3xY0_bench-tag"}"#.utf8)
        for _ in 0..<max(10, count / 20) {
            _ = try WebPushEncryption.encrypt(plaintext, receiverKey: receiverPublic, authSecret: auth, bodyLength: 256)
        }
        let start = ContinuousClock.now
        var bytes = 0
        for _ in 0..<count {
            bytes += try WebPushEncryption.encrypt(
                plaintext, receiverKey: receiverPublic, authSecret: auth, bodyLength: 256
            ).count
        }
        let seconds = (ContinuousClock.now - start).seconds
        TransportBenchmarks.emit(
            #"{"benchmark":"webpush-encrypt","messages":\#(count),"bodyBytes":\#(bytes / max(count, 1)),"#
                + #""microseconds":\#(String(format: "%.1f", seconds * 1e6 / Double(max(count, 1))))}"#)
    }
}
