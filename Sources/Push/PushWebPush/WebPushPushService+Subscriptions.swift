import Foundation
import OpenSSLCrypto
import Push

/// JMAP's PushSubscription (RFC 8620 §7.2) is a Web Push subscription: a push-service URL the client chose and,
/// normally, the keys its messages are encrypted to. The same policy checks the URL, the same keys are checked,
/// the same VAPID key signs and the same connections carry the messages as for signals.
extension WebPushPushService: SubscriptionPushService {
    /// Checks the URL with the endpoint policy and the keys as a browser subscription's; returns `p256dh.auth`, or
    /// an empty string when there are no keys.
    public func checkSubscription(
        url: String, keys: (p256dh: String, auth: String)?
    ) throws(RegistrationError) -> String {
        _ = try configuration.endpointPolicy.check(url)
        guard let keys else { return "" }
        return try WebPushSubscriptionKeys(p256dh: keys.p256dh, auth: keys.auth).stored
    }

    /// Sends `message`: encrypted and padded to ``SubscriptionPushBody/bodyLength`` bytes when `keys` are given,
    /// else as `application/json`.
    public func push(
        _ message: SubscriptionPushMessage, url: String, keys: String, topic: String
    ) async -> PushOutcome {
        await send(toEndpoint: url, keys: keys, topic: topic) { keys in
            let plaintext = try SubscriptionPushBody.plaintext(of: message)
            guard let keys else { return plaintext }
            return try SubscriptionPushBody.encrypt(plaintext, to: keys)
        }
    }
}

/// The bytes of a ``SubscriptionPushMessage``: its JSON, checked on the bytes by ``check(_:)`` before it is
/// encrypted (or sent as it is), and padded so every encrypted body has the same length whatever the message.
enum SubscriptionPushBody {
    /// Every encrypted body's length: room for a StateChange naming four types in an account.
    static let bodyLength = 512
    /// The plaintext capacity of one body.
    static let plaintextCapacity = bodyLength - WebPushEncryption.headerLength - WebPushEncryption.recordOverhead

    /// The checked plaintext.
    static func plaintext(of message: SubscriptionPushMessage) throws(WebPushPayloadGuard.Violation) -> [UInt8] {
        guard let json = message.json else { throw WebPushPayloadGuard.Violation(reason: "fields") }
        let bytes = Array(json.utf8)
        try check(bytes)
        return bytes
    }

    /// Encrypts to the subscription (RFC 8291), padded to ``bodyLength``.
    static func encrypt(_ plaintext: [UInt8], to keys: WebPushSubscriptionKeys) throws -> [UInt8] {
        try WebPushEncryption.encrypt(
            plaintext, receiverKey: try P256PublicKey(rawRepresentation: keys.p256dh), authSecret: keys.auth,
            bodyLength: bodyLength)
    }

    /// The last check before a message leaves: a StateChange holding only account ids, type names and state
    /// strings, or a PushVerification holding only an id and a code, each an opaque token, within the capacity.
    static func check(_ plaintext: [UInt8]) throws(WebPushPayloadGuard.Violation) {
        guard plaintext.count <= plaintextCapacity else { throw WebPushPayloadGuard.Violation(reason: "too long") }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(plaintext))) as? [String: Any] else {
            throw WebPushPayloadGuard.Violation(reason: "fields")
        }
        func isToken(_ value: Any?) -> Bool { (value as? String).map(SubscriptionPushMessage.isToken) ?? false }
        switch object["@type"] as? String {
        case "StateChange":
            guard Set(object.keys) == ["@type", "changed"], let changed = object["changed"] as? [String: Any],
                !changed.isEmpty,
                changed.allSatisfy({ account in
                    guard SubscriptionPushMessage.isToken(account.key), let states = account.value as? [String: Any]
                    else { return false }
                    return !states.isEmpty
                        && states.allSatisfy { SubscriptionPushMessage.isToken($0.key) && isToken($0.value) }
                })
            else { throw WebPushPayloadGuard.Violation(reason: "changed") }
        case "PushVerification":
            guard Set(object.keys) == ["@type", "pushSubscriptionId", "verificationCode"],
                isToken(object["pushSubscriptionId"]), isToken(object["verificationCode"])
            else { throw WebPushPayloadGuard.Violation(reason: "verification") }
        default:
            throw WebPushPayloadGuard.Violation(reason: "type")
        }
    }
}
