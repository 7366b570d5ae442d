import Durations
import Foundation
import Locking
import OpenSSLCrypto
import SimulatorSupport
import TestSupport
import Testing
import WebPushSimulator

/// An application server: its VAPID key pair, and the pushes it makes (RFC 8291 bodies, RFC 8292 tokens).
struct ApplicationServer {
    let key: P256PrivateKey
    let publicKey: [UInt8]

    init() throws {
        key = try P256PrivateKey()
        publicKey = try key.publicKey.rawRepresentation
    }

    var publicKeyText: String { Base64URL.encode(publicKey) }

    /// A VAPID token with the given claims (`nil` leaves one out).
    func token(
        audience: String?, expiry: Int64?, subject: String? = "mailto:ops@example.com", signer: P256PrivateKey? = nil
    )
        throws -> String
    {
        var claims: [String: JWTValue] = [:]
        if let audience { claims["aud"] = .string(audience) }
        if let expiry { claims["exp"] = .integer(expiry) }
        if let subject { claims["sub"] = .string(subject) }
        return try JWT.makeES256(claims: claims, key: signer ?? key)
    }

    /// `vapid t=…, k=…` for `audience`, valid for 12 hours from `now`.
    func authorization(audience: String, now: Date, key k: String? = nil) throws -> String {
        let token = try token(audience: audience, expiry: Int64(now.timeIntervalSince1970) + 12 * 3600)
        return "vapid t=\(token), k=\(k ?? publicKeyText)"
    }
}

/// An in-process gateway with a manual clock, driven through `handle(_:)`.
struct GatewayHarness {
    static let base = "https://push.example.test"
    let clock = ManualClock(start: Date(timeIntervalSince1970: 1_800_000_000))
    let gateway: WebPushGateway
    let server: ApplicationServer

    init(configure: (inout WebPushGatewayConfiguration) -> Void = { _ in }) throws {
        var configuration = WebPushGatewayConfiguration(endpointBase: Self.base)
        configure(&configuration)
        gateway = WebPushGateway(configuration: configuration, clock: clock)
        server = try ApplicationServer()
    }

    func subscribe() throws -> WebPushCreatedSubscription {
        try gateway.subscribe(applicationServerKey: server.publicKey)
    }

    /// An RFC 8291 body for the subscription, padded to `bodyLength`.
    func encrypt(_ text: String, for subscription: WebPushCreatedSubscription, bodyLength: Int = 200) throws -> Data {
        guard let p256dh = Base64URL.decode(subscription.p256dh), let auth = Base64URL.decode(subscription.auth) else {
            throw HarnessError("bad subscription keys")
        }
        let body = try WebPushEncryption.encrypt(
            Array(text.utf8), receiverKey: try P256PublicKey(rawRepresentation: p256dh), authSecret: auth,
            bodyLength: bodyLength)
        return Data(body)
    }

    /// The headers a correct sender sends, with `changes` applied (`nil` removes a header).
    func headers(_ changes: [String: String?] = [:]) throws -> [(name: String, value: String)] {
        var fields: [String: String] = [
            "ttl": "60", "urgency": "normal", "content-encoding": "aes128gcm",
            "authorization": try server.authorization(audience: Self.base, now: clock.now()),
        ]
        for (name, value) in changes { fields[name] = value }
        return fields.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// `POST` to the subscription's endpoint.
    func push(
        to subscription: WebPushCreatedSubscription, _ body: Data, headers: [(name: String, value: String)],
        method: String = "POST"
    ) -> SimulatorProviderResponse {
        let path = String(subscription.endpoint.dropFirst(Self.base.count))
        return gateway.handle(SimulatorProviderRequest(method: method, path: path, headers: headers, body: body))
    }

    /// A correct push of `text`, with header `changes`.
    func push(
        _ text: String, to subscription: WebPushCreatedSubscription, _ changes: [String: String?] = [:]
    )
        throws -> SimulatorProviderResponse
    {
        push(to: subscription, try encrypt(text, for: subscription), headers: try headers(changes))
    }

    /// A message stream that records what it is sent.
    func connect(_ subscription: WebPushCreatedSubscription) -> RecordingSink {
        let sink = RecordingSink()
        _ = gateway.connect(subscription.id, sink: sink.sink)
        return sink
    }

    func lastEntry() -> WebPushLogEntry? { gateway.logEntries().last }
}

/// Collects the events a message stream was sent.
final class RecordingSink: Sendable {
    private let events = LockedValue<[String]>([])

    var sink: WebPushMessageSink {
        WebPushMessageSink(
            send: { [events] text in
                events.withLock { $0.append(text) }
                return true
            }, close: {})
    }

    var received: [[String: Any]] {
        events.withLock { $0 }.compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    var plaintexts: [String] { received.compactMap { $0["plaintext"] as? String } }
}

/// Stands in for the WebSocket listener: records the frames sent to each connection and the closes.
final class RecordingTransport: Sendable {
    private let frames = LockedValue<[UInt64: [String]]>([:])
    private let closes = LockedValue<[UInt64: Int32]>([:])

    var transport: MozillaTransport {
        MozillaTransport(
            send: { [frames, closes] connection, text in
                guard closes.withLock({ $0[connection] == nil }) else { return false }
                frames.withLock { $0[connection, default: []].append(text) }
                return true
            }, close: { [closes] connection, status in closes.withLock { $0[connection] = status } })
    }

    /// The frames sent to `connection`, as JSON objects.
    func messages(_ connection: UInt64) -> [[String: Any]] {
        frames.withLock { $0[connection] ?? [] }.compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    func closeStatus(_ connection: UInt64) -> Int32? { closes.withLock { $0[connection] } }
}
