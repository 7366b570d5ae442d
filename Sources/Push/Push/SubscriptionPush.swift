/// What a standard's own push subscription (JMAP's `PushSubscription`, RFC 8620 §7.2) may be sent: a StateChange
/// that names, per account, the types that changed and their new state strings, or the PushVerification that
/// proves the URL reaches the client. Nothing else can be put in one: no message, no address, no count.
public enum SubscriptionPushMessage: Sendable, Hashable {
    /// RFC 8620 §7.1: `{"@type":"StateChange","changed":{accountId:{type:state}}}`.
    case stateChange(accountID: String, states: [String: String])
    /// RFC 8620 §7.2.2: `{"@type":"PushVerification","pushSubscriptionId","verificationCode"}`.
    case verification(subscriptionID: String, code: String)

    /// The JSON text, keys in a fixed order (types sorted), built from checked tokens only: every string is an
    /// opaque token (letters, digits, `-`, `_`, `.`, `:`), or the message is `nil`.
    public var json: String? {
        switch self {
        case .stateChange(let accountID, let states):
            guard Self.isToken(accountID), !states.isEmpty,
                states.allSatisfy({ Self.isToken($0.key) && Self.isToken($0.value) })
            else { return nil }
            let members = states.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\"\($0.value)\"" }
            return "{\"@type\":\"StateChange\",\"changed\":{\"\(accountID)\":{\(members.joined(separator: ","))}}}"
        case .verification(let subscriptionID, let code):
            guard Self.isToken(subscriptionID), Self.isToken(code) else { return nil }
            return
                "{\"@type\":\"PushVerification\",\"pushSubscriptionId\":\"\(subscriptionID)\",\"verificationCode\":\"\(code)\"}"
        }
    }

    /// An opaque token: 1 to 64 characters of letters, digits, `-`, `_`, `.` and `:`.
    public static func isToken(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count)
            && text.utf8.allSatisfy { byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
                    || byte == UInt8(ascii: ":")
            }
    }
}

/// A push service that also carries ``SubscriptionPushMessage``s to URLs that clients chose (JMAP's
/// PushSubscription is a Web Push subscription: a push-service URL and the keys to encrypt to). It checks the URL
/// and keys when a subscription is made, and sends one message at a time, reporting one ``PushOutcome``.
public protocol SubscriptionPushService: Sendable {
    /// Checks a subscription's URL and keys (`p256dh` and `auth`, base64url; `nil`: none, the message goes
    /// unencrypted) and returns the keys in their stored form (empty for none). Throws for a URL the server must
    /// not send to or keys that are not keys.
    func checkSubscription(url: String, keys: (p256dh: String, auth: String)?) throws(RegistrationError) -> String
    /// Sends `message` to `url`, encrypted to `keys` (the stored form; empty: unencrypted), replacing any message
    /// of the same `topic` a push service still holds. Never throws: every failure is an outcome.
    func push(_ message: SubscriptionPushMessage, url: String, keys: String, topic: String) async -> PushOutcome
}
