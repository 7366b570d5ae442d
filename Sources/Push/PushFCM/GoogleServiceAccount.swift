import Foundation
import JSONText
import OpenSSLCrypto

/// A Google service account, read from the JSON key file Google's console gives: the project it sends for and the
/// RSA key that signs its OAuth assertions.
public struct GoogleServiceAccount: Sendable {
    /// `project_id`: the Firebase project messages are sent for.
    public var projectID: String
    /// `private_key_id`: the `kid` of the assertions.
    public var privateKeyID: String
    /// `client_email`: the assertions' issuer.
    public var clientEmail: String
    /// `token_uri`: where assertions are exchanged for access tokens.
    public var tokenURI: String
    /// `private_key`: the RSA key.
    public var privateKey: RSAPrivateKey

    /// Creates an account from its parts.
    public init(
        projectID: String, privateKeyID: String, clientEmail: String, tokenURI: String, privateKey: RSAPrivateKey
    ) {
        self.projectID = projectID
        self.privateKeyID = privateKeyID
        self.clientEmail = clientEmail
        self.tokenURI = tokenURI
        self.privateKey = privateKey
    }

    /// Reads a service-account key file; the error names the field that is missing or wrong, never the key.
    public init(file path: String) throws(FCMConfigurationError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw FCMConfigurationError("cannot read the service-account file \(path)")
        }
        try self.init(json: data, source: path)
    }

    /// Reads a service-account key from its JSON; `source` names it in errors.
    public init(json data: Data, source: String) throws(FCMConfigurationError) {
        guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            throw FCMConfigurationError("\(source) is not a JSON object (a Google service-account key file)")
        }
        func field(_ name: String) throws(FCMConfigurationError) -> String {
            guard let value = object[name] as? String, !value.isEmpty else {
                throw FCMConfigurationError("\(source): \"\(name)\" is missing or not a string")
            }
            return value
        }
        guard try field("type") == "service_account" else {
            throw FCMConfigurationError("\(source): \"type\" must be \"service_account\"")
        }
        projectID = try field("project_id")
        privateKeyID = try field("private_key_id")
        clientEmail = try field("client_email")
        tokenURI = try field("token_uri")
        guard tokenURI.hasPrefix("https://") || tokenURI.hasPrefix("http://") else {
            throw FCMConfigurationError("\(source): \"token_uri\" must be an http(s) URL")
        }
        do {
            privateKey = try RSAPrivateKey(pemRepresentation: try field("private_key"))
        } catch let error as FCMConfigurationError {
            throw error
        } catch {
            throw FCMConfigurationError("\(source): \"private_key\" is not an RSA private key in PEM")
        }
    }

    /// The service-account JSON for this account (what `mailboxd dev-setup` writes).
    public var json: String {
        let object: JSONValue = [
            "type": "service_account", "project_id": .string(projectID), "private_key_id": .string(privateKeyID),
            "private_key": .string(privateKey.pemRepresentation), "client_email": .string(clientEmail),
            "client_id": "0", "token_uri": .string(tokenURI), "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        ]
        return object.prettyJSON + "\n"
    }

    /// The OAuth scope of FCM sends.
    public static let messagingScope = "https://www.googleapis.com/auth/firebase.messaging"

    /// The JWT-bearer assertion exchanged at ``tokenURI`` for an access token (RS256, valid one hour).
    func assertion(audience: String, issuedAt: Int64) throws -> String {
        try JWT.makeRS256(
            keyID: privateKeyID,
            claims: [
                "iss": .string(clientEmail), "scope": .string(Self.messagingScope), "aud": .string(audience),
                "iat": .integer(issuedAt), "exp": .integer(issuedAt + 3600),
            ], key: privateKey)
    }
}

/// A configuration or service-account file mistake, said in one sentence.
public struct FCMConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong.
    public var message: String

    /// Creates an error.
    public init(_ message: String) { self.message = message }

    /// The message.
    public var description: String { message }
}
