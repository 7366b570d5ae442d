import Foundation

/// Computes the tag a signal's `st` carries for a state, under the device's signal key (the `signalKey` of its
/// registration): the first 16 characters of base64url(HMAC-SHA256(key, state)). The engine compares it with the
/// tag of its own state to decide whether a signal needs a fetch, so no push service ever sees a state.
///
/// HMAC-SHA256 is supplied by the platform (CryptoKit's `HMAC<SHA256>` in an app; OpenSSL in `mail-client`).
public struct SignalTagger: Sendable, Equatable {
    /// The device's signal key.
    public let key: [UInt8]
    private let hmacSHA256: @Sendable (_ key: [UInt8], _ message: [UInt8]) -> [UInt8]

    /// A tagger for `key`, computing HMAC-SHA256 with `hmacSHA256`.
    public init(key: [UInt8], hmacSHA256: @escaping @Sendable (_ key: [UInt8], _ message: [UInt8]) -> [UInt8]) {
        self.key = key
        self.hmacSHA256 = hmacSHA256
    }

    /// A tagger for the base64url `signalKey` a registration returned; `nil` when it is not 32 bytes.
    public init?(
        signalKey: String, hmacSHA256: @escaping @Sendable (_ key: [UInt8], _ message: [UInt8]) -> [UInt8]
    ) {
        var base64 = signalKey.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64), data.count == 32 else { return nil }
        self.init(key: Array(data), hmacSHA256: hmacSHA256)
    }

    /// The tag of `state`.
    public func tag(of state: String) -> String {
        let mac = Data(hmacSHA256(key, Array(state.utf8))).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        return String(mac.prefix(16))
    }

    /// Taggers are equal when their keys are.
    public static func == (lhs: SignalTagger, rhs: SignalTagger) -> Bool { lhs.key == rhs.key }
}
