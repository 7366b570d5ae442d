import Foundation
import OpenSSLCrypto
import SimulatorSupport

/// RFC 8030 §5.3's `Urgency` values.
public enum WebPushUrgency: String, Sendable, Codable, CaseIterable {
    /// On power and Wi-Fi.
    case veryLow = "very-low"
    /// On power or Wi-Fi.
    case low
    /// Neither on power nor on Wi-Fi.
    case normal
    /// Even on low battery.
    case high
}

/// The RFC 8030 headers of a push request, checked as a push service does.
struct PushHeaders: Sendable, Equatable {
    /// The TTL kept (the request's, cut to the service's maximum).
    var ttl: Int
    /// `Urgency` (`normal` when absent).
    var urgency: WebPushUrgency
    /// `Topic`, when given.
    var topic: String?

    /// Checks `TTL` (required, a non-negative integer: 400), `Urgency` (one of RFC 8030's four: 400) and `Topic`
    /// (at most 32 characters of the URL-safe base64 alphabet: 400).
    static func parse(_ request: SimulatorProviderRequest, maxTTL: Int) throws(WebPushAPIError) -> PushHeaders {
        guard let ttlText = request.header("ttl")?.trimmingCharacters(in: .whitespaces) else {
            throw .badRequest("Missing TTL header (RFC 8030 §5.2).", errno: 111)
        }
        guard !ttlText.isEmpty, ttlText.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw .badRequest("TTL must be a non-negative integer number of seconds.", errno: 112)
        }
        let ttl = Int(ttlText).map { min($0, maxTTL) } ?? maxTTL
        var urgency = WebPushUrgency.normal
        if let text = request.header("urgency")?.trimmingCharacters(in: .whitespaces) {
            guard let value = WebPushUrgency(rawValue: text.lowercased()) else {
                throw .badRequest("Urgency must be very-low, low, normal or high (RFC 8030 §5.3).")
            }
            urgency = value
        }
        var topic: String?
        if let text = request.header("topic") {
            guard !text.isEmpty, text.utf8.count <= 32, text.utf8.allSatisfy(isBase64URL) else {
                throw .badRequest(
                    "Topic must be 1 to 32 characters of the URL-safe base64 alphabet (RFC 8030 §5.4).", errno: 113)
            }
            topic = text
        }
        return PushHeaders(ttl: ttl, urgency: urgency, topic: topic)
    }

    /// Checks the body's size (413 beyond `maxBytes`) and coding: a body needs `Content-Encoding: aes128gcm`
    /// (none: 400; another coding, such as the draft `aesgcm`: 415).
    static func checkBody(_ request: SimulatorProviderRequest, maxBytes: Int) throws(WebPushAPIError) {
        guard request.body.count <= maxBytes else {
            throw WebPushAPIError(
                status: 413, errno: 104, message: "Message body too large: at most \(maxBytes) bytes.")
        }
        guard !request.body.isEmpty else { return }
        guard let coding = request.header("content-encoding")?.trimmingCharacters(in: .whitespaces) else {
            throw .badRequest("A body needs Content-Encoding: aes128gcm (RFC 8291).", errno: 110)
        }
        guard coding.lowercased() == "aes128gcm" else {
            throw WebPushAPIError(
                status: 415, errno: 110, message: "Unsupported Content-Encoding: only aes128gcm (RFC 8188, 8291).")
        }
    }

    static func isBase64URL(_ c: UInt8) -> Bool {
        (0x41...0x5a).contains(c) || (0x61...0x7a).contains(c) || (0x30...0x39).contains(c) || c == 0x2d || c == 0x5f
    }
}

/// What the capture log shows of a request's VAPID credentials: the key and the token's decoded header and
/// claims, never the token itself.
public struct VAPIDSummary: Sendable, Codable, Equatable {
    /// The `k` parameter (the application server's public key, base64url).
    public var k: String?
    /// The token's `alg`.
    public var alg: String?
    /// The token's `typ`.
    public var typ: String?
    /// The `aud` claim.
    public var aud: String?
    /// The `exp` claim.
    public var exp: Int64?
    /// The `sub` claim.
    public var sub: String?
    /// Whether the signature verified with `k`.
    public var signatureValid: Bool
}

/// RFC 8292's `Authorization: vapid t=<JWT>, k=<key>`, checked as a push service does.
struct VAPIDCheck {
    /// What the checks found: what to log, and the refusal if any.
    struct Outcome {
        var summary: VAPIDSummary?
        var error: WebPushAPIError?
        /// Set when every check but the key comparison passed.
        var verified: Verified?
    }

    /// Credentials that passed every check but the key comparison, kept so a sender that reuses its token (as
    /// senders do, for hours) is not verified again on every push.
    struct Verified: Sendable {
        var summary: VAPIDSummary
        var key: [UInt8]
        var expiry: Int64
    }

    /// Verified credentials by origin and `Authorization` value, at most `capacity` (all forgotten when full).
    struct Cache: Sendable {
        var capacity = 1024
        private var entries: [String: Verified] = [:]

        func lookup(_ authorization: String, origin: String) -> Verified? { entries[origin + " " + authorization] }

        mutating func store(_ verified: Verified, authorization: String, origin: String) {
            if entries.count >= capacity { entries = [:] }
            entries[origin + " " + authorization] = verified
        }
    }

    /// Checks the credentials: missing, malformed, a bad signature, an `aud` other than `origin`, an `exp`
    /// missing, past or more than `maxLifetime` seconds ahead, or a `sub` that is not a `mailto:` or `https:`
    /// URI are 401; a `k` other than `expectedKey` (the subscription's `applicationServerKey`) is 403. Without an
    /// `expectedKey` the credentials are optional, but checked when given.
    static func check(
        _ authorization: String?, expectedKey: [UInt8]?, origin: String, now: Date, maxLifetime: Int,
        cache: inout Cache
    ) -> Outcome {
        let seconds = Int64(now.timeIntervalSince1970.rounded(.down))
        if let authorization, let hit = cache.lookup(authorization, origin: origin) {
            guard hit.expiry > seconds else {
                return Outcome(summary: hit.summary, error: .unauthorized("The VAPID token has expired."))
            }
            return Outcome(summary: hit.summary, error: keyMismatch(hit.key, expectedKey))
        }
        let outcome = verify(
            authorization, expectedKey: expectedKey, origin: origin, now: now, maxLifetime: maxLifetime)
        if let authorization, let verified = outcome.verified {
            cache.store(verified, authorization: authorization, origin: origin)
        }
        guard let verified = outcome.verified else { return outcome }
        return Outcome(summary: verified.summary, error: keyMismatch(verified.key, expectedKey))
    }

    /// 403 when a subscription's applicationServerKey is not `k`.
    private static func keyMismatch(_ key: [UInt8], _ expectedKey: [UInt8]?) -> WebPushAPIError? {
        guard let expectedKey, expectedKey != key else { return nil }
        return WebPushAPIError(
            status: 403, errno: 109,
            message: "k is not the applicationServerKey this subscription was made with (RFC 8292 §4.2).")
    }

    /// Every check but the key comparison; `verified` when they all pass.
    private static func verify(
        _ authorization: String?, expectedKey: [UInt8]?, origin: String, now: Date, maxLifetime: Int
    ) -> Outcome {
        guard let authorization else {
            if expectedKey == nil { return Outcome() }
            return Outcome(
                error: .unauthorized(
                    "Missing Authorization: this subscription has an applicationServerKey, so VAPID is required."))
        }
        let (scheme, parameters) = parse(authorization)
        guard scheme == "vapid" else {
            return Outcome(error: .unauthorized("Authorization must use the vapid scheme (RFC 8292 §3)."))
        }
        guard let token = parameters["t"], let keyText = parameters["k"] else {
            return Outcome(error: .unauthorized("The vapid scheme needs both t= and k= (RFC 8292 §3)."))
        }
        var summary = VAPIDSummary(k: String(keyText.prefix(100)), signatureValid: false)
        if let decoded = try? JWT.decodeUnverifiedGeneral(token) {
            summary.alg = decoded.header["alg"]?.stringValue.map { String($0.prefix(16)) }
            summary.typ = decoded.header["typ"]?.stringValue.map { String($0.prefix(16)) }
            summary.aud = decoded[claim: "aud"]?.stringValue.map { String($0.prefix(200)) }
            summary.exp = decoded[claim: "exp"]?.integerValue
            summary.sub = decoded[claim: "sub"]?.stringValue.map { String($0.prefix(200)) }
        }
        guard let keyBytes = Base64URL.decode(keyText), let key = try? P256PublicKey(rawRepresentation: keyBytes)
        else {
            return Outcome(
                summary: summary, error: .unauthorized("k is not a base64url uncompressed P-256 point (65 bytes)."))
        }
        let decoded: DecodedJWT
        do {
            decoded = try JWT.verifyES256General(token, key: key)
        } catch {
            return Outcome(summary: summary, error: .unauthorized("The VAPID token does not verify with k: \(error)."))
        }
        summary.signatureValid = true
        guard let audience = decoded[claim: "aud"]?.stringValue else {
            return Outcome(summary: summary, error: .unauthorized("The VAPID token has no aud claim."))
        }
        let parts = URLComponents(string: audience)
        guard WebPushGatewayConfiguration.origin(of: audience) == origin, parts?.path.isEmpty == true,
            parts?.query == nil, parts?.fragment == nil, parts?.user == nil
        else {
            return Outcome(
                summary: summary, error: .unauthorized("The VAPID aud must be the push resource's origin, \(origin)."))
        }
        guard let expiry = decoded[claim: "exp"]?.integerValue else {
            return Outcome(summary: summary, error: .unauthorized("The VAPID token has no exp claim."))
        }
        let seconds = Int64(now.timeIntervalSince1970.rounded(.down))
        guard expiry > seconds else {
            return Outcome(summary: summary, error: .unauthorized("The VAPID token has expired."))
        }
        guard expiry <= seconds + Int64(maxLifetime) else {
            return Outcome(
                summary: summary,
                error: .unauthorized("The VAPID exp is more than \(maxLifetime / 3600) hours ahead (RFC 8292 §2)."))
        }
        guard let subject = decoded[claim: "sub"]?.stringValue,
            subject.hasPrefix("mailto:") || subject.hasPrefix("https:")
        else {
            return Outcome(
                summary: summary, error: .unauthorized("The VAPID sub must be a mailto: or https: URI (RFC 8292 §2.1).")
            )
        }
        return Outcome(summary: summary, verified: Verified(summary: summary, key: keyBytes, expiry: expiry))
    }

    /// The scheme (lower-cased) and the `name=value` parameters of an `Authorization` value.
    static func parse(_ value: String) -> (scheme: String, parameters: [String: String]) {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard let space = trimmed.firstIndex(where: { $0 == " " || $0 == "\t" }) else {
            return (trimmed.lowercased(), [:])
        }
        let scheme = trimmed[..<space].lowercased()
        var parameters: [String: String] = [:]
        for part in trimmed[space...].split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1)
            guard pair.count == 2 else { continue }
            let name = pair[0].trimmingCharacters(in: .whitespaces).lowercased()
            var value = pair[1].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
                value = String(value.dropFirst().dropLast())
            }
            parameters[name] = value
        }
        return (scheme, parameters)
    }
}

/// The `aes128gcm` layout a push service can see without the keys: an 86-byte header whose key id is a P-256
/// point, a record size of at least 18, and one record (RFC 8188 §2, RFC 8291 §4).
enum EncryptedBodyLayout {
    /// The header's record size, or why the layout is wrong.
    static func check(_ body: [UInt8]) -> Result<UInt32, WebPushEncryption.DecryptionError> {
        guard body.count >= WebPushEncryption.headerLength + WebPushEncryption.recordOverhead else {
            return .failure(.header("too short"))
        }
        let recordSize = body[16..<20].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard recordSize >= 18 else { return .failure(.header("record size below 18")) }
        guard body[20] == 65 else { return .failure(.header("key id is not a 65-byte P-256 point")) }
        guard (try? P256PublicKey(rawRepresentation: body[21..<WebPushEncryption.headerLength])) != nil else {
            return .failure(.header("key id is not a point on P-256"))
        }
        guard body.count - WebPushEncryption.headerLength <= Int(recordSize) else { return .failure(.multipleRecords) }
        return .success(recordSize)
    }
}
