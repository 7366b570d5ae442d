import Foundation
import JSONText
import OpenSSLCrypto

/// An OAuth 2 error answer of the token endpoint: `{"error","error_description"}`.
public struct OAuthError: Error, Sendable, Equatable {
    /// RFC 6749's code: `invalid_grant`, `invalid_request`, `unsupported_grant_type`, `invalid_scope`.
    public var error: String
    /// What was wrong (never the assertion).
    public var description: String

    /// Creates an error.
    public init(_ error: String, _ description: String) {
        self.error = error
        self.description = description
    }

    /// The JSON body.
    public var body: Data {
        let object: JSONValue = ["error": .string(error), "error_description": .string(description)]
        return Data(object.jsonBytes)
    }
}

/// An access token the token endpoint issued.
struct IssuedToken: Sendable {
    var clientEmail: String
    var projectID: String
    var expiresAt: Date
}

/// Google's token endpoint for service accounts (`POST /token`, the OAuth 2 JWT-bearer grant of RFC 7523):
/// checks the RS256 assertion against the key of the account it names and issues short-lived access tokens.
/// A value confined to the gateway's lock.
struct TokenIssuer: Sendable {
    static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    static let googleAudience = "https://oauth2.googleapis.com/token"
    static let scopes: Set<String> = [
        "https://www.googleapis.com/auth/firebase.messaging", "https://www.googleapis.com/auth/cloud-platform",
    ]
    /// Allowed clock difference for `iat`, in seconds.
    static let skew: TimeInterval = 60

    private let accounts: [String: FCMServiceAccount]
    let lifetime: Int
    private(set) var tokens: [String: IssuedToken] = [:]
    /// Token requests by `client_email` (the unknown ones under `""`), granted or not.
    private(set) var requests: [String: Int] = [:]
    /// Tokens issued by `client_email`.
    private(set) var issued: [String: Int] = [:]

    init(accounts: [FCMServiceAccount], lifetime: Int) {
        var byEmail: [String: FCMServiceAccount] = [:]
        for account in accounts { byEmail[account.clientEmail] = account }
        self.accounts = byEmail
        self.lifetime = lifetime
    }

    /// Whether some trusted account belongs to `project`.
    func knowsProject(_ project: String) -> Bool { accounts.values.contains { $0.projectID == project } }

    /// Answers a form-encoded token request: the access token's JSON, or the OAuth error; and the assertion's
    /// issuer, when it had one.
    mutating func grant(form body: Data, now: Date) -> (issuer: String?, result: Result<Data, OAuthError>) {
        var issuer: String?
        let result = grant(form: body, now: now, issuer: &issuer)
        return (issuer, result)
    }

    private mutating func grant(form body: Data, now: Date, issuer found: inout String?) -> Result<Data, OAuthError> {
        let form = Self.parseForm(String(decoding: body, as: UTF8.self))
        guard let grantType = form["grant_type"] else {
            return .failure(OAuthError("invalid_request", "Missing required parameter: grant_type"))
        }
        guard grantType == Self.grantType else {
            return .failure(OAuthError("unsupported_grant_type", "Invalid grant_type: \(grantType.prefix(80))"))
        }
        guard let assertion = form["assertion"], !assertion.isEmpty else {
            return .failure(OAuthError("invalid_request", "Missing required parameter: assertion"))
        }
        let unverified: DecodedJWT
        do { unverified = try JWT.decodeUnverifiedGeneral(assertion) } catch {
            requests["", default: 0] += 1
            return .failure(OAuthError("invalid_grant", "Invalid JWT: \(error)"))
        }
        let issuer = unverified[claim: "iss"]?.stringValue ?? ""
        found = issuer.isEmpty ? nil : String(issuer.prefix(200))
        guard let account = accounts[issuer] else {
            requests["", default: 0] += 1
            return .failure(OAuthError("invalid_grant", "Invalid grant: account not found"))
        }
        requests[account.clientEmail, default: 0] += 1
        if let kid = unverified.header["kid"]?.stringValue, let expected = account.privateKeyID, kid != expected {
            return .failure(OAuthError("invalid_grant", "Invalid JWT Signature."))
        }
        let token: DecodedJWT
        do { token = try JWT.verifyRS256(assertion, key: account.publicKey) } catch {
            return .failure(OAuthError("invalid_grant", "Invalid JWT Signature."))
        }
        let audience = token[claim: "aud"]?.stringValue
        guard let audience, audience == Self.googleAudience || audience == account.tokenURI else {
            return .failure(OAuthError("invalid_grant", "Invalid JWT: Failed audience check."))
        }
        let scopes = Set((token[claim: "scope"]?.stringValue ?? "").split(separator: " ").map(String.init))
        guard !scopes.isDisjoint(with: Self.scopes) else {
            return .failure(
                OAuthError(
                    "invalid_scope",
                    "The scope does not allow Firebase Cloud Messaging (need firebase.messaging"
                        + " or cloud-platform)."))
        }
        guard let iat = token[claim: "iat"]?.integerValue, let exp = token[claim: "exp"]?.integerValue else {
            return .failure(OAuthError("invalid_grant", "Invalid JWT: iat and exp must be numbers."))
        }
        let nowSeconds = now.timeIntervalSince1970
        guard Double(iat) <= nowSeconds + Self.skew, Double(exp) > nowSeconds, exp > iat, exp - iat <= 3600 else {
            return .failure(
                OAuthError(
                    "invalid_grant",
                    "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. "
                        + "Check your iat and exp values in the JWT claim."))
        }
        var accessToken = "ya29.c." + SecureRandom.base64URL(96)
        while tokens[accessToken] != nil { accessToken = "ya29.c." + SecureRandom.base64URL(96) }
        if tokens.count > 50_000 { tokens = tokens.filter { $0.value.expiresAt > now } }
        tokens[accessToken] = IssuedToken(
            clientEmail: account.clientEmail, projectID: account.projectID,
            expiresAt: now.addingTimeInterval(TimeInterval(lifetime)))
        issued[account.clientEmail, default: 0] += 1
        let answer: JSONValue = [
            "access_token": .string(accessToken), "expires_in": .int(Int64(lifetime)), "token_type": "Bearer",
        ]
        return .success(Data(answer.jsonBytes))
    }

    /// The issued token `value`, or why it cannot be used (the `ErrorInfo` reason of the 401).
    func check(_ value: String?, now: Date) -> Result<IssuedToken, FCMAPIError> {
        guard let value, !value.isEmpty else { return .failure(.unauthenticated(reason: "CREDENTIALS_MISSING")) }
        guard let token = tokens[value] else {
            return .failure(.unauthenticated(reason: "ACCESS_TOKEN_TYPE_UNSUPPORTED"))
        }
        guard token.expiresAt > now else { return .failure(.unauthenticated(reason: "ACCESS_TOKEN_EXPIRED")) }
        return .success(token)
    }

    static func parseForm(_ text: String) -> [String: String] {
        var result: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ part: Substring) -> String {
                let spaced = part.replacingOccurrences(of: "+", with: " ")
                return spaced.removingPercentEncoding ?? spaced
            }
            let name = decode(parts[0])
            if result[name] == nil { result[name] = parts.count > 1 ? decode(parts[1]) : "" }
        }
        return result
    }
}
