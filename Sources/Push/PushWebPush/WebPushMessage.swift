import Foundation
import OpenSSLCrypto
import Push

/// The Web Push form of a content-free signal: the RFC 8291 plaintext is the JSON
///
/// ```json
/// {"acct":"<alias>","st":"<tag>","badge":3}
/// ```
///
/// (`badge` for badge signals only), encrypted to the subscription's keys with a fresh key and salt and padded so
/// every body is ``bodyLength`` bytes: the push service sees neither the fields nor, from the length, which of
/// them a signal holds. It travels with:
///
/// - `TTL` ``timeToLive`` (after an hour the browser syncs on its own anyway),
/// - `Urgency` from the deployment's signal kind (``urgency(for:)``), the same for every device of a deployment,
/// - `Topic`: 32 base64url characters derived from the alias, so a push service holding an older signal for an
///   offline browser replaces it with the newer one (RFC 8030 §5.4).
struct WebPushMessage: Sendable {
    /// Every encrypted body's length: the 86-byte header, a 153-byte plaintext capacity and the 17 bytes of
    /// delimiter and tag. The largest signal (a 64-character alias, a tag, a 19-digit badge) is 127 bytes.
    static let bodyLength = 256
    /// The plaintext capacity of one body.
    static let plaintextCapacity = bodyLength - WebPushEncryption.headerLength - WebPushEncryption.recordOverhead
    /// How long a push service keeps a signal for an offline browser, in seconds.
    static let timeToLive = 3600

    let signal: PushSignal

    /// The plaintext, byte for byte (keys in the order above).
    var plaintext: [UInt8] {
        var fields = ["\"acct\":\"\(signal.alias.rawValue)\""]
        if let tag = signal.tag { fields.append("\"st\":\"\(tag.rawValue)\"") }
        if let badge = signal.badge { fields.append("\"badge\":\(badge)") }
        return Array("{\(fields.joined(separator: ","))}".utf8)
    }

    /// The `Urgency` (RFC 8030 §5.3) of every signal of `kind`: `normal` for badge signals (a new mail, RFC 8030's
    /// "incoming chat message": worth waking a phone, not worth `high`, which is for calls and alarms), `low` for
    /// background signals (nothing shows until the app syncs, so a device on battery may hold them until it is on
    /// power or Wi-Fi; the app converges on its own anyway). A UnifiedPush distributor decides from it whether to
    /// wake the phone. It is configured per deployment, so it tells a push service nothing about one signal.
    static func urgency(for kind: PushSignal.Kind) -> String {
        switch kind {
        case .badge: "normal"
        case .background: "low"
        }
    }

    /// The `Topic` for the device: the first 32 characters of base64url(SHA-256("signalfetch-topic:" ‖ alias)), a
    /// constant per device that names nothing else.
    static func topic(for alias: DeviceAlias) -> String {
        String(Base64URL.encode(SHA256.hash("signalfetch-topic:" + alias.rawValue)).prefix(32))
    }

    /// The encrypted body for a subscription.
    func body(for keys: WebPushSubscriptionKeys) throws -> [UInt8] {
        let plaintext = self.plaintext
        try WebPushPayloadGuard.check(plaintext)
        return try WebPushEncryption.encrypt(
            plaintext, receiverKey: try P256PublicKey(rawRepresentation: keys.p256dh), authSecret: keys.auth,
            bodyLength: Self.bodyLength)
    }
}

/// The last check before a Web Push plaintext is encrypted: a JSON object holding only `acct` (an alias), `st` (a
/// state tag) and `badge` (a non-negative integer), short enough for the fixed body. Anything else is a defect and
/// is never sent.
enum WebPushPayloadGuard {
    /// Why a plaintext was refused.
    struct Violation: Error, Equatable {
        var reason: String
    }

    static func check(_ plaintext: [UInt8]) throws(Violation) {
        guard plaintext.count <= WebPushMessage.plaintextCapacity else { throw Violation(reason: "too long") }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(plaintext))) as? [String: Any],
            Set(object.keys).isSubset(of: ["acct", "st", "badge"]),
            let alias = object["acct"] as? String, (try? DeviceAlias(alias)) != nil
        else { throw Violation(reason: "fields") }
        if let tag = object["st"] {
            guard let tag = tag as? String, (try? StateTag(tag)) != nil else { throw Violation(reason: "st") }
        }
        if let badge = object["badge"] {
            guard let badge = badge as? NSNumber, badge.int64Value >= 0,
                badge.doubleValue == Double(badge.int64Value)
            else { throw Violation(reason: "badge") }
        }
    }
}
