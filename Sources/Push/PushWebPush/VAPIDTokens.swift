import Durations
import Foundation
import Locking
import OpenSSLCrypto

/// VAPID (RFC 8292) for one application-server key: an ES256 token per push-service origin, reused while it is
/// fresh, and the `Authorization` value `vapid t=<token>, k=<public key>`.
///
/// Claims: `aud` the origin, `exp` ``lifetime`` ahead (RFC 8292 allows at most 24 h), `sub` the contact
/// (`mailto:` or `https:`). A token is replaced once half its lifetime has passed, so one in use never expires
/// mid-flight. The key is the same for every process sending for the store (it is a file), so tokens need not be
/// shared.
final class VAPIDTokens: Sendable {
    /// How long a token is valid.
    static let lifetime: Double = 12 * 3600

    let key: P256PrivateKey
    /// The public key, base64url of the 65-byte point: `k`, and what browsers subscribe with.
    let publicKey: String
    /// `vapid-` and the first 12 hex digits of the SHA-256 of the public key: what a subscription made for this key
    /// is stored with (its address's `app`), so it is signed with this key after another replaced it.
    let keyID: String
    let subject: String
    private let clock: any WallClock
    private let cache = LockedValue<[String: (token: String, expires: Double)]>([:])

    init(key: P256PrivateKey, subject: String, clock: any WallClock) throws {
        self.key = key
        let raw = try key.publicKey.rawRepresentation
        self.publicKey = Base64URL.encode(raw)
        keyID = "vapid-" + Hex.encode(SHA256.hash(raw).prefix(6))
        self.subject = subject
        self.clock = clock
    }

    /// The `Authorization` header value for a request to `origin`.
    func authorization(for origin: String) throws -> String {
        let time = clock.secondsSince1970
        if let cached = cache.withLock({ $0[origin] }), cached.expires - time > Self.lifetime / 2 {
            return "vapid t=\(cached.token), k=\(publicKey)"
        }
        let expires = (time + Self.lifetime).rounded(.down)
        let token = try JWT.makeES256(
            claims: ["aud": .string(origin), "exp": .integer(Int64(expires)), "sub": .string(subject)], key: key)
        cache.withLock { cache in
            // Bounded as the service's connections are: past that many origins the old tokens go (they are remade
            // on use).
            if cache.count >= WebPushPushService.maximumOrigins, cache[origin] == nil { cache.removeAll() }
            cache[origin] = (token, expires)
        }
        return "vapid t=\(token), k=\(publicKey)"
    }

    /// How many origins have a token now.
    var cachedOrigins: Int { cache.withLock { $0.count } }

    /// Whether `subject` is a contact RFC 8292 accepts: a `mailto:` address or an `https:` URL.
    static func isValidSubject(_ subject: String) -> Bool {
        guard subject.utf8.count <= 256, subject.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else { return false }
        if subject.hasPrefix("mailto:") { return subject.dropFirst(7).contains("@") }
        if subject.hasPrefix("https://") { return subject.count > 8 }
        return false
    }
}
