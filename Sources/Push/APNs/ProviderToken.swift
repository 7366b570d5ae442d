import Foundation
import OpenSSLCrypto

/// A signed provider authentication token (a JWT ES256) sent as `authorization: bearer <token>`.
///
/// `description` hides the token itself so it never reaches a log.
public struct ProviderToken: Sendable, Hashable, CustomStringConvertible {
    /// The compact JWT.
    public let value: String
    /// When it was issued (the `iat` claim, whole seconds).
    public let issuedAt: Date

    /// Creates a token value.
    public init(value: String, issuedAt: Date) {
        self.value = value
        self.issuedAt = issuedAt
    }

    /// The issue time only.
    public var description: String { "ProviderToken(issuedAt: \(Int64(issuedAt.timeIntervalSince1970)))" }
}

/// The provider's signing key: a `.p8` P-256 key with its key id and team id.
public struct APNsSigningKey: Sendable {
    /// The private key.
    public let privateKey: P256PrivateKey
    /// The 10-character key id Apple assigned (the JWT `kid`).
    public let keyID: String
    /// The team id (the JWT `iss`).
    public let teamID: String

    /// Creates a signing key from a loaded private key.
    public init(privateKey: P256PrivateKey, keyID: String, teamID: String) {
        self.privateKey = privateKey
        self.keyID = keyID
        self.teamID = teamID
    }

    /// Reads the PEM (PKCS#8, `-----BEGIN PRIVATE KEY-----`) text of a `.p8` key.
    public init(pem: String, keyID: String, teamID: String) throws {
        self.init(privateKey: try P256PrivateKey(pemRepresentation: pem), keyID: keyID, teamID: teamID)
    }

    /// Reads a `.p8` key file.
    public init(p8File path: String, keyID: String, teamID: String) throws {
        try self.init(pem: String(contentsOfFile: path, encoding: .utf8), keyID: keyID, teamID: teamID)
    }

    /// Signs a new token issued at `date` (truncated to whole seconds).
    public func makeToken(issuedAt date: Date) throws -> ProviderToken {
        let seconds = Int64(date.timeIntervalSince1970)
        let value = try JWT.makeES256(
            claims: JWTClaims(keyID: keyID, issuer: teamID, issuedAt: seconds), key: privateKey)
        return ProviderToken(value: value, issuedAt: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }
}
