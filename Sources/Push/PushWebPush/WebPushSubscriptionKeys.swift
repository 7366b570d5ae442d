import OpenSSLCrypto
import Push

/// A subscription's message-encryption keys, as the browser's `PushSubscription.toJSON()` gives them: `p256dh`, the
/// browser's P-256 public key (a 65-byte uncompressed point), and `auth`, a 16-byte secret; both base64url.
public struct WebPushSubscriptionKeys: Sendable, Equatable {
    /// The P-256 point, 65 bytes.
    public var p256dh: [UInt8]
    /// The auth secret, 16 bytes.
    public var auth: [UInt8]

    /// Checks both keys: `p256dh` must decode to a point on P-256, `auth` to exactly 16 bytes.
    public init(p256dh: String, auth: String) throws(RegistrationError) {
        guard p256dh.utf8.count <= 100, let point = Base64URL.decode(Self.unpadded(p256dh)), point.count == 65,
            (try? P256PublicKey(rawRepresentation: point)) != nil
        else {
            throw RegistrationError(
                "invalidKeys", "'keys.p256dh' must be a base64url P-256 public key (a 65-byte uncompressed point).")
        }
        guard auth.utf8.count <= 32, let secret = Base64URL.decode(Self.unpadded(auth)), secret.count == 16 else {
            throw RegistrationError("invalidKeys", "'keys.auth' must be a base64url 16-byte secret.")
        }
        self.p256dh = point
        self.auth = secret
    }

    /// Reads the stored form, `p256dh.auth`.
    public init?(stored: String) {
        let parts = stored.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let point = Base64URL.decode(parts[0]), point.count == 65,
            let secret = Base64URL.decode(parts[1]), secret.count == 16
        else { return nil }
        p256dh = point
        auth = secret
    }

    /// The stored form, `p256dh.auth` (base64url without padding).
    public var stored: String { Base64URL.encode(p256dh) + "." + Base64URL.encode(auth) }

    /// Browsers send base64url without padding; some libraries add `=`.
    private static func unpadded(_ text: String) -> Substring {
        text[..<(text.firstIndex(of: "=") ?? text.endIndex)]
    }
}
