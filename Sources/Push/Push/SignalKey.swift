import OpenSSLCrypto

/// A device's signal key: 32 random bytes chosen at registration, returned to the device once over TLS and
/// never sent through a push service. Signals carry the tag of a state under this key (``tag(of:)``), which the
/// device computes from its own state to decide whether to fetch.
public struct SignalKey: Sendable, Hashable {
    /// The key's bytes.
    public let bytes: [UInt8]

    /// A new random key.
    public init() {
        bytes = SecureRandom.bytes(32)
    }

    /// The key as it was given to the device: base64url without padding, 32 bytes. `nil` for anything else.
    public init?(base64URL text: String) {
        guard let bytes = Base64URL.decode(Substring(text)), bytes.count == 32 else { return nil }
        self.bytes = bytes
    }

    /// The key as the device receives it: base64url without padding.
    public var base64URL: String { Base64URL.encode(bytes) }

    /// The tag of `state`: the first 16 characters of base64url(HMAC-SHA256(key, UTF-8 of the state string)).
    public func tag(of state: String) -> StateTag {
        let mac = HMACSHA256.authenticationCode(for: Array(state.utf8), key: bytes)
        // 96 bits of the MAC: cannot fail, base64url characters only.
        return try! StateTag(String(Base64URL.encode(mac).prefix(StateTag.length)))
    }
}
