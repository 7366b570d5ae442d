import Foundation
import OpenSSLCrypto

/// Who may open the console: whoever knows the console token (`DIR/console-token`). A sign-in exchanges it for a
/// cookie that says when it ends and carries an HMAC of that under a key derived from the token, so any instance
/// sharing the token accepts it, a forged or altered cookie is refused, and replacing the token ends every cookie.
public struct ConsoleAccess: Sendable {
    /// The cookie's name.
    public static let cookieName = "signalfetch_console"
    /// How long a console sign-in lasts, in seconds.
    public static let lifetime: Double = 12 * 3600

    private let tokenHash: [UInt8]
    private let key: [UInt8]

    /// Access for `token` (at least 16 characters).
    public init(token: String) {
        tokenHash = SHA256.hash(token)
        key = SHA256.hash("signalfetch console cookie\u{0}" + token)
    }

    /// Whether `candidate` is the token (in constant time).
    public func accepts(token candidate: String) -> Bool {
        ConstantTime.equals(SHA256.hash(candidate), tokenHash)
    }

    /// A cookie value valid until `now` + ``lifetime``.
    public func cookie(now: Double) -> String {
        let expiry = String(Int64(now + Self.lifetime))
        return expiry + "." + Base64URL.encode(HMACSHA256.authenticationCode(for: Array(expiry.utf8), key: key))
    }

    /// Whether `value` is a cookie this access issued that has not ended at `now`.
    public func verifies(cookie value: String, now: Double) -> Bool {
        let parts = value.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let expiry = Int64(parts[0]), Double(expiry) > now,
            Double(expiry) <= now + Self.lifetime + 60,
            let mac = Base64URL.decode(String(parts[1]))
        else { return false }
        return ConstantTime.equals(HMACSHA256.authenticationCode(for: Array(parts[0].utf8), key: key), mac)
    }
}
