import Foundation
import OpenSSLCrypto

/// A provider signing key the gateway trusts: the key id, its team and the public half.
public struct ProviderKey: Sendable {
    /// The 10-character key identifier (the JWT `kid`).
    public var keyID: String
    /// The team identifier the key belongs to (the JWT `iss`).
    public var teamID: String
    /// The public key that verifies the provider tokens.
    public var publicKey: P256PublicKey

    /// Creates a key from its parts.
    public init(keyID: String, teamID: String, publicKey: P256PublicKey) {
        self.keyID = keyID
        self.teamID = teamID
        self.publicKey = publicKey
    }

    /// Loads a key from a `KEY_ID:TEAM_ID:PUBLIC_PEM_PATH` specification (the `--provider-key` flag).
    public init(specification: String) throws(ProviderKeyError) {
        let parts = specification.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty, !parts[2].isEmpty else {
            throw .malformedSpecification(specification)
        }
        let path = String(parts[2])
        let pem: String
        do {
            pem = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw .unreadableFile(path: path, reason: error.localizedDescription)
        }
        do {
            self.init(
                keyID: String(parts[0]), teamID: String(parts[1]), publicKey: try P256PublicKey(pemRepresentation: pem))
        } catch {
            throw .invalidKey(path: path, reason: "\(error)")
        }
    }
}

/// Why a `--provider-key` specification could not be loaded.
public enum ProviderKeyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not `KEY_ID:TEAM_ID:PUBLIC_PEM_PATH`.
    case malformedSpecification(String)
    /// The PEM file could not be read.
    case unreadableFile(path: String, reason: String)
    /// The file holds no P-256 public key.
    case invalidKey(path: String, reason: String)

    /// A one-line explanation.
    public var description: String {
        switch self {
        case .malformedSpecification(let text): return "provider key '\(text)' is not KEY_ID:TEAM_ID:PUBLIC_PEM_PATH"
        case .unreadableFile(let path, let reason): return "cannot read provider key file \(path): \(reason)"
        case .invalidKey(let path, let reason): return "provider key file \(path) holds no P-256 public key: \(reason)"
        }
    }
}
