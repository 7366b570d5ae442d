import Foundation
import JSONText

/// A JSON value in a JWT header or claim set (general claims, not only APNs's).
public enum JWTValue: Sendable, Equatable {
    /// A JSON string.
    case string(String)
    /// A JSON number without a fraction.
    case integer(Int64)
    /// `true` or `false`.
    case bool(Bool)

    /// The string, when this is a string.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The integer, when this is an integer.
    public var integerValue: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }
}

/// A decoded token: its header and claims. Values of other JSON types (arrays, objects, null, fractions) are left
/// out.
public struct DecodedJWT: Sendable, Equatable {
    /// The JOSE header (`alg`, `typ`, `kid`, …).
    public var header: [String: JWTValue]
    /// The claim set.
    public var claims: [String: JWTValue]

    /// Creates a decoded token from its parts.
    public init(header: [String: JWTValue], claims: [String: JWTValue]) {
        self.header = header
        self.claims = claims
    }

    /// The claim called `name`, if present.
    public subscript(claim name: String) -> JWTValue? { claims[name] }
}

extension JWT {
    /// Makes an RS256 token: header `{"alg":"RS256","typ":"JWT","kid"?:keyID}`, claims serialized with sorted keys.
    public static func makeRS256(keyID: String?, claims: [String: JWTValue], key: RSAPrivateKey) throws -> String {
        var header: [(String, JWTValue)] = [("alg", .string("RS256")), ("typ", .string("JWT"))]
        if let keyID { header.append(("kid", .string(keyID))) }
        let payload = claims.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        let signingInput =
            Base64URL.encode(Array(serialize(header).utf8)) + "." + Base64URL.encode(Array(serialize(payload).utf8))
        let signature = try key.signatureRS256(for: Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// Verifies `token`'s RS256 signature with `key` (the header's `alg` must be `RS256`) and returns its header
    /// and claims. Expiry, audience and issuer are the caller's policy.
    public static func verifyRS256(_ token: String, key: RSAPublicKey) throws -> DecodedJWT {
        let parsed = try parseGeneral(token)
        guard let alg = parsed.decoded.header["alg"] else { throw JWTError.missingClaim("alg") }
        guard alg == .string("RS256") else {
            throw JWTError.unsupportedAlgorithm(String((alg.stringValue ?? "?").prefix(16)))
        }
        guard key.isValidRS256Signature(parsed.signature, for: Array(parsed.signingInput.utf8)) else {
            throw JWTError.invalidSignature
        }
        return parsed.decoded
    }

    /// Makes a general ES256 token (VAPID's): header `{"typ":"JWT","alg":"ES256"}`, claims serialized with sorted
    /// keys, the signature in JWS's raw `r‖s` form.
    public static func makeES256(claims: [String: JWTValue], key: P256PrivateKey) throws -> String {
        let header: [(String, JWTValue)] = [("typ", .string("JWT")), ("alg", .string("ES256"))]
        let payload = claims.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        let signingInput =
            Base64URL.encode(Array(serialize(header).utf8)) + "." + Base64URL.encode(Array(serialize(payload).utf8))
        let signature = try key.signature(for: Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// Verifies a general ES256 token (the header's `alg` must be `ES256`) and returns its header and claims.
    /// Expiry, audience and subject are the caller's policy.
    public static func verifyES256General(_ token: String, key: P256PublicKey) throws -> DecodedJWT {
        let parsed = try parseGeneral(token)
        guard let alg = parsed.decoded.header["alg"] else { throw JWTError.missingClaim("alg") }
        guard alg == .string("ES256") else {
            throw JWTError.unsupportedAlgorithm(String((alg.stringValue ?? "?").prefix(16)))
        }
        guard key.isValidSignature(parsed.signature, for: Array(parsed.signingInput.utf8)) else {
            throw JWTError.invalidSignature
        }
        return parsed.decoded
    }

    /// The header and claims of `token` without checking the signature (to pick the key by `kid` or `iss`).
    public static func decodeUnverifiedGeneral(_ token: String) throws -> DecodedJWT {
        try parseGeneral(token).decoded
    }

    private static func parseGeneral(
        _ token: String
    ) throws -> (
        decoded: DecodedJWT, signingInput: String, signature: [UInt8]
    ) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw JWTError.malformed("expected three parts") }
        guard let headerBytes = Base64URL.decode(parts[0]), let payloadBytes = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2])
        else { throw JWTError.malformed("invalid base64url") }
        let decoder = JSONDecoder()
        guard let header = try? decoder.decode([String: LooseJSONValue].self, from: Data(headerBytes)),
            let claims = try? decoder.decode([String: LooseJSONValue].self, from: Data(payloadBytes))
        else { throw JWTError.malformed("header or claims are not JSON objects") }
        let decoded = DecodedJWT(
            header: header.compactMapValues(\.value), claims: claims.compactMapValues(\.value))
        return (decoded, String(parts[0]) + "." + String(parts[1]), signature)
    }

    private static func serialize(_ members: [(String, JWTValue)]) -> String {
        var out = "{"
        for (index, (name, value)) in members.enumerated() {
            if index > 0 { out += "," }
            out += JSONText.quoted(name) + ":"
            switch value {
            case .string(let text): out += JSONText.quoted(text)
            case .integer(let number): out += String(number)
            case .bool(let flag): out += flag ? "true" : "false"
            }
        }
        return out + "}"
    }
}

/// A JSON member value that becomes a `JWTValue` when it is a string, integer or boolean.
private struct LooseJSONValue: Decodable {
    let value: JWTValue?

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let flag = try? container.decode(Bool.self) {
            value = .bool(flag)
        } else if let number = try? container.decode(Int64.self) {
            value = .integer(number)
        } else if let text = try? container.decode(String.self) {
            value = .string(text)
        } else if let number = try? container.decode(Double.self), number.rounded() == number,
            let exact = Int64(exactly: number)
        {
            value = .integer(exact)
        } else {
            value = nil
        }
    }
}
