import Foundation
import JSONText

/// The parts of a verified ES256 JSON Web Token that APNs provider authentication uses.
public struct JWTClaims: Sendable, Equatable {
    /// The `kid` header: the signing key's identifier.
    public var keyID: String
    /// The `iss` claim: the team identifier.
    public var issuer: String
    /// The `iat` claim, seconds since 1970.
    public var issuedAt: Int64

    /// Creates claims.
    public init(keyID: String, issuer: String, issuedAt: Int64) {
        self.keyID = keyID
        self.issuer = issuer
        self.issuedAt = issuedAt
    }
}

/// Why a token was refused.
public enum JWTError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not three base64url parts of JSON.
    case malformed(String)
    /// The header names an algorithm other than ES256.
    case unsupportedAlgorithm(String)
    /// A required header or claim is missing or of the wrong type.
    case missingClaim(String)
    /// The signature does not verify with the key.
    case invalidSignature

    /// A short description that never includes the token.
    public var description: String {
        switch self {
        case .malformed(let why): return "malformed token: \(why)"
        case .unsupportedAlgorithm(let alg): return "unsupported algorithm \(alg)"
        case .missingClaim(let name): return "missing or invalid \(name)"
        case .invalidSignature: return "invalid signature"
        }
    }
}

/// ES256 JSON Web Tokens as APNs uses them: header `{"alg":"ES256","kid":…}`, claims `{"iss":…,"iat":…}`.
public enum JWT {
    /// Makes a signed token with a numeric `iat`.
    public static func makeES256(claims: JWTClaims, key: P256PrivateKey) throws -> String {
        let header = #"{"alg":"ES256","kid":\#(JSONText.quoted(claims.keyID))}"#
        let payload = #"{"iss":\#(JSONText.quoted(claims.issuer)),"iat":\#(claims.issuedAt)}"#
        let signingInput = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8))
        let signature = try key.signature(for: Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// The header and claims of `token` without checking the signature (to pick the key by `kid`).
    public static func decodeUnverified(_ token: String) throws -> JWTClaims {
        try parse(token).claims
    }

    /// Verifies `token`'s ES256 signature with `key` and returns its claims. Expiry is the caller's policy.
    public static func verifyES256(_ token: String, key: P256PublicKey) throws -> JWTClaims {
        let parsed = try parse(token)
        guard key.isValidSignature(parsed.signature, for: Array(parsed.signingInput.utf8)) else {
            throw JWTError.invalidSignature
        }
        return parsed.claims
    }

    private static func parse(_ token: String) throws -> (claims: JWTClaims, signingInput: String, signature: [UInt8]) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw JWTError.malformed("expected three parts") }
        guard let headerBytes = Base64URL.decode(parts[0]), let payloadBytes = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2])
        else { throw JWTError.malformed("invalid base64url") }
        guard let header = try? JSONSerialization.jsonObject(with: Data(headerBytes)) as? [String: Any],
            let payload = try? JSONSerialization.jsonObject(with: Data(payloadBytes)) as? [String: Any]
        else { throw JWTError.malformed("header or claims are not JSON objects") }
        guard let alg = header["alg"] as? String else { throw JWTError.missingClaim("alg") }
        guard alg == "ES256" else { throw JWTError.unsupportedAlgorithm(String(alg.prefix(16))) }
        guard let kid = header["kid"] as? String else { throw JWTError.missingClaim("kid") }
        guard let iss = payload["iss"] as? String else { throw JWTError.missingClaim("iss") }
        guard let iatNumber = payload["iat"] as? NSNumber, !(payload["iat"] is String),
            let iat = Int64(exactly: iatNumber.doubleValue)
        else { throw JWTError.missingClaim("iat") }
        let signingInput = String(parts[0]) + "." + String(parts[1])
        return (JWTClaims(keyID: kid, issuer: iss, issuedAt: iat), signingInput, signature)
    }
}
