import Foundation
import OpenSSLCrypto

/// Checks provider authentication tokens as APNs does, as a value the gateway keeps under its lock.
///
/// Verified tokens are cached (a signature is checked once per token, not once per request); the age
/// of a token is checked on every request. A signing key's token may be replaced at most once per
/// ``updateInterval``; only tokens that verified and were not expired count as replacements.
public struct ProviderTokenVerifier: Sendable {
    private enum Cached: Sendable {
        case valid(JWTClaims)
        case invalid
    }

    private struct KeyHistory: Sendable {
        var newestIssuedAt: Int64
        var updates: [Date] = []
    }

    /// The trusted keys by key id.
    public let keys: [String: ProviderKey]
    /// How long a token stays valid after its `iat` (APNs: one hour).
    public var tokenLifetime: TimeInterval
    /// The window in which a key's token may be replaced only once (APNs: 20 minutes).
    public var updateInterval: TimeInterval
    /// The most tokens remembered in the cache before it is emptied.
    public var cacheLimit: Int

    private var cache: [String: Cached] = [:]
    /// The last `authorization` value that verified, and its claims: providers reuse one token for
    /// many requests, so most requests are answered without hashing the token.
    private var lastValid: (authorization: String, claims: JWTClaims)?
    /// `lastValid`'s claims were accepted by ``recordUse(of:now:)``: the key's newest `iat` is at least
    /// theirs from then on (it never decreases), so later uses of the same token are never replacements.
    private var lastValidRecorded = false
    private var histories: [String: KeyHistory] = [:]
    private(set) var signatureChecks = 0

    /// Creates a verifier trusting `keys`.
    public init(
        keys: [ProviderKey], tokenLifetime: TimeInterval = 3600, updateInterval: TimeInterval = 1200,
        cacheLimit: Int = 10_000
    ) {
        self.keys = Dictionary(keys.map { ($0.keyID, $0) }, uniquingKeysWith: { _, last in last })
        self.tokenLifetime = tokenLifetime
        self.updateInterval = updateInterval
        self.cacheLimit = cacheLimit
    }

    /// The number of signature verifications done so far (the rest were cache hits).
    public var signatureVerificationCount: Int { signatureChecks }

    /// Checks the value of an `authorization` header at time `now`; `nil` means the request is authorized.
    public mutating func authorize(_ authorization: String?, now: Date) -> RejectionReason? {
        guard let authorization, !authorization.isEmpty else { return .missingProviderToken }
        if let lastValid, lastValid.authorization == authorization {
            if lastValidRecorded { return checkLifetime(lastValid.claims, now: now) }
            let reason = check(lastValid.claims, now: now)
            lastValidRecorded = reason == nil
            return reason
        }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return .invalidProviderToken }
        let token = Self.trimmed(parts[1])
        let claims: JWTClaims
        switch cache[token] ?? verify(token) {
        case .invalid: return .invalidProviderToken
        case .valid(let verified): claims = verified
        }
        lastValid = (authorization, claims)
        let reason = check(claims, now: now)
        lastValidRecorded = reason == nil
        return reason
    }

    private mutating func check(_ claims: JWTClaims, now: Date) -> RejectionReason? {
        if let reason = checkLifetime(claims, now: now) { return reason }
        return recordUse(of: claims, now: now)
    }

    private func checkLifetime(_ claims: JWTClaims, now: Date) -> RejectionReason? {
        let nowSeconds = Int64(now.timeIntervalSince1970.rounded(.down))
        if Double(nowSeconds - claims.issuedAt) > tokenLifetime { return .expiredProviderToken }
        return nil
    }

    /// `text` without surrounding whitespace. Tokens are ASCII: when neither end is a space, a tab or a
    /// non-ASCII byte the text is taken as is, without a trip through Foundation's Unicode trimming.
    private static func trimmed(_ text: Substring) -> String {
        let utf8 = text.utf8
        if let first = utf8.first, let last = utf8.last, Self.isPlainByte(first), Self.isPlainByte(last) {
            return String(text)
        }
        return text.trimmingCharacters(in: .whitespaces)
    }

    private static func isPlainByte(_ byte: UInt8) -> Bool { byte > 0x20 && byte < 0x80 }

    private mutating func verify(_ token: String) -> Cached {
        if cache.count >= cacheLimit {
            cache.removeAll(keepingCapacity: true)
            lastValid = nil
            lastValidRecorded = false
        }
        signatureChecks += 1
        let result: Cached
        if let unverified = try? JWT.decodeUnverified(token), let key = keys[unverified.keyID],
            key.teamID == unverified.issuer, let claims = try? JWT.verifyES256(token, key: key.publicKey)
        {
            result = .valid(claims)
        } else {
            result = .invalid
        }
        cache[token] = result
        return result
    }

    private mutating func recordUse(of claims: JWTClaims, now: Date) -> RejectionReason? {
        guard var history = histories[claims.keyID] else {
            histories[claims.keyID] = KeyHistory(newestIssuedAt: claims.issuedAt)
            return nil
        }
        // A token no newer than the key's newest one is not a replacement (several connections may
        // still use the previous token for a while).
        guard claims.issuedAt > history.newestIssuedAt else { return nil }
        history.updates.removeAll { now.timeIntervalSince($0) >= updateInterval }
        guard history.updates.isEmpty else {
            histories[claims.keyID] = history
            return .tooManyProviderTokenUpdates
        }
        history.updates.append(now)
        history.newestIssuedAt = claims.issuedAt
        histories[claims.keyID] = history
        return nil
    }
}
