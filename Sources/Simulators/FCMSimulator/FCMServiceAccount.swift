import Foundation
import OpenSSLCrypto

/// A Google service account as fcm-sim trusts it: the public half of the JSON file's `private_key`, for the
/// file's `project_id`, with its `client_email` as the issuer of the assertions it signs.
public struct FCMServiceAccount: Sendable {
    /// The `project_id`: the project whose messages the account may send.
    public var projectID: String
    /// The `client_email`: the `iss` of the account's JWT-bearer assertions.
    public var clientEmail: String
    /// The `private_key_id`: the `kid` of its assertions, when the file has one.
    public var privateKeyID: String?
    /// The `token_uri` the file names (an assertion's `aud` may be it).
    public var tokenURI: String?
    /// The key that verifies the account's assertions.
    public var publicKey: RSAPublicKey

    /// Creates an account from its parts.
    public init(
        projectID: String, clientEmail: String, privateKeyID: String?, tokenURI: String?, publicKey: RSAPublicKey
    ) {
        self.projectID = projectID
        self.clientEmail = clientEmail
        self.privateKeyID = privateKeyID
        self.tokenURI = tokenURI
        self.publicKey = publicKey
    }

    /// Reads Google's service-account JSON (`project_id`, `private_key`, `client_email`, optional
    /// `private_key_id` and `token_uri`) and derives the public key from the private one.
    public init(json: Data) throws(FCMConfigurationError) {
        guard let object = try? JSONSerialization.jsonObject(with: json) as? [String: Any] else {
            throw .invalidServiceAccount("not a JSON object")
        }
        if let type = object["type"] as? String, type != "service_account" {
            throw .invalidServiceAccount("\"type\" is \(type), not service_account")
        }
        guard let project = object["project_id"] as? String, !project.isEmpty else {
            throw .invalidServiceAccount("\"project_id\" missing")
        }
        guard let email = object["client_email"] as? String, !email.isEmpty else {
            throw .invalidServiceAccount("\"client_email\" missing")
        }
        guard let pem = object["private_key"] as? String else {
            throw .invalidServiceAccount("\"private_key\" missing")
        }
        let key: RSAPrivateKey
        do { key = try RSAPrivateKey(pemRepresentation: pem) } catch {
            throw .invalidServiceAccount("\"private_key\" is not an RSA private key PEM")
        }
        self.init(
            projectID: project, clientEmail: email, privateKeyID: object["private_key_id"] as? String,
            tokenURI: object["token_uri"] as? String, publicKey: key.publicKey)
    }

    /// Reads a service-account JSON file.
    public init(contentsOfFile path: String) throws(FCMConfigurationError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .invalidServiceAccount("\(path): file missing or unreadable")
        }
        do { try self.init(json: data) } catch { throw .invalidServiceAccount("\(path): \(error.reason)") }
    }
}

/// Why a configuration cannot be used.
public enum FCMConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A service-account file is unusable.
    case invalidServiceAccount(String)

    /// The reason alone.
    public var reason: String {
        switch self {
        case .invalidServiceAccount(let reason): return reason
        }
    }

    /// A one-line explanation.
    public var description: String { "invalid service account: \(reason)" }
}
