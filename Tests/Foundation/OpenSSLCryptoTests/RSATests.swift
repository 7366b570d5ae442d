import Foundation
import OpenSSLCrypto
import TestSupport
import Testing

@Suite struct RSATests {
    /// One generated key shared by the tests (RSA key generation takes a while).
    static let key: RSAPrivateKey = try! RSAPrivateKey()

    @Test func signAndVerifyRoundTrip() throws {
        let key = Self.key
        let claims: [String: JWTValue] = [
            "iss": .string("sim@signalfetch-dev.iam.gserviceaccount.com"),
            "scope": .string("https://www.googleapis.com/auth/firebase.messaging"),
            "aud": .string("https://oauth2.googleapis.com/token"), "iat": .integer(1_700_000_000),
            "exp": .integer(1_700_003_600), "admin": .bool(true),
        ]
        let token = try JWT.makeRS256(keyID: "abc123", claims: claims, key: key)
        let decoded = try JWT.verifyRS256(token, key: key.publicKey)
        #expect(decoded.claims == claims)
        #expect(decoded.header == ["alg": .string("RS256"), "typ": .string("JWT"), "kid": .string("abc123")])
        #expect(decoded[claim: "exp"] == .integer(1_700_003_600))
        #expect(try JWT.decodeUnverifiedGeneral(token) == decoded)
        let payload = try #require(Base64URL.decode(token.split(separator: ".")[1]))
        #expect(String(decoding: payload, as: UTF8.self).hasPrefix(#"{"admin":true,"aud":"#))
        #expect(try #require(Base64URL.decode(token.split(separator: ".")[2])).count == 256)

        let noKid = try JWT.makeRS256(keyID: nil, claims: ["iss": .string("x")], key: key)
        #expect(try JWT.verifyRS256(noKid, key: key.publicKey).header["kid"] == nil)
    }

    @Test func tamperedOrForeignTokensAreRefused() throws {
        let key = Self.key
        let token = try JWT.makeRS256(keyID: "k", claims: ["iss": .string("a"), "iat": .integer(1)], key: key)
        var parts = token.split(separator: ".").map(String.init)
        parts[1] = Base64URL.encode(Array(#"{"iat":1,"iss":"b"}"#.utf8))
        #expect(throws: JWTError.invalidSignature) {
            try JWT.verifyRS256(parts.joined(separator: "."), key: key.publicKey)
        }
        var signature = try #require(Base64URL.decode(token.split(separator: ".")[2]))
        signature[100] ^= 0x01
        let flipped = token.split(separator: ".")[0...1].joined(separator: ".") + "." + Base64URL.encode(signature)
        #expect(throws: JWTError.invalidSignature) { try JWT.verifyRS256(flipped, key: key.publicKey) }

        let other = try RSAPrivateKey()
        #expect(throws: JWTError.invalidSignature) { try JWT.verifyRS256(token, key: other.publicKey) }
        #expect(throws: JWTError.self) { try JWT.verifyRS256("a.b", key: key.publicKey) }
        #expect(!key.publicKey.isValidRS256Signature([], for: [1, 2, 3]))
    }

    @Test func wrongAlgorithmIsRefused() throws {
        let key = Self.key
        let token = try JWT.makeRS256(keyID: nil, claims: ["iss": .string("a")], key: key)
        let parts = token.split(separator: ".").map(String.init)
        for alg in ["none", "HS256", "ES256", "RS512"] {
            let header = Base64URL.encode(Array(#"{"alg":"\#(alg)","typ":"JWT"}"#.utf8))
            #expect(throws: JWTError.unsupportedAlgorithm(alg)) {
                try JWT.verifyRS256(header + "." + parts[1] + "." + parts[2], key: key.publicKey)
            }
        }
        let missing = Base64URL.encode(Array(#"{"typ":"JWT"}"#.utf8))
        #expect(throws: JWTError.missingClaim("alg")) {
            try JWT.verifyRS256(missing + "." + parts[1] + "." + parts[2], key: key.publicKey)
        }
        // An ES256 token is not accepted either.
        let es = try JWT.makeES256(
            claims: JWTClaims(keyID: "K", issuer: "T", issuedAt: 1), key: try P256PrivateKey())
        #expect(throws: JWTError.unsupportedAlgorithm("ES256")) { try JWT.verifyRS256(es, key: key.publicKey) }
    }

    @Test func pemRoundTripAndNonRSAKeysAreRefused() throws {
        let key = Self.key
        #expect(key.pemRepresentation.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        #expect(key.publicKey.pemRepresentation.hasPrefix("-----BEGIN PUBLIC KEY-----"))
        let reloaded = try RSAPrivateKey(pemRepresentation: key.pemRepresentation)
        #expect(reloaded.publicKey.pemRepresentation == key.publicKey.pemRepresentation)
        let publicKey = try RSAPublicKey(pemRepresentation: key.publicKey.pemRepresentation)
        let signature = try reloaded.signatureRS256(for: Array("hello".utf8))
        #expect(publicKey.isValidRS256Signature(signature, for: Array("hello".utf8)))
        #expect(!publicKey.isValidRS256Signature(signature, for: Array("hellO".utf8)))

        let ec = try P256PrivateKey()
        #expect(throws: CryptoError.self) { try RSAPrivateKey(pemRepresentation: try ec.pemRepresentation) }
        #expect(throws: CryptoError.self) { try RSAPublicKey(pemRepresentation: try ec.publicKey.pemRepresentation) }
        #expect(throws: CryptoError.self) { try RSAPrivateKey(pemRepresentation: "not a key") }
        #expect(throws: CryptoError.self) { try RSAPrivateKey(bits: 512) }
    }

    /// A key made by `openssl genpkey` reads (PKCS#8 and PKCS#1), and its signature made by `openssl dgst` verifies.
    @Test func interoperatesWithTheOpenSSLCommandLine() throws {
        let openssl = try #require(Subprocess.which("openssl"), "openssl CLI missing")
        let dir = try TemporaryDirectory()
        let made = try Subprocess.run(
            openssl,
            ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", dir.path("key.pem")])
        try #require(made.status == 0, "\(made.stderr)")
        let pem = try String(contentsOfFile: dir.path("key.pem"), encoding: .utf8)
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let key = try RSAPrivateKey(pemRepresentation: pem)

        let pkcs1 = try Subprocess.run(
            openssl, ["rsa", "-in", dir.path("key.pem"), "-traditional", "-out", dir.path("key1.pem")])
        try #require(pkcs1.status == 0, "\(pkcs1.stderr)")
        let pkcs1PEM = try String(contentsOfFile: dir.path("key1.pem"), encoding: .utf8)
        #expect(pkcs1PEM.hasPrefix("-----BEGIN RSA PRIVATE KEY-----"))
        #expect(
            try RSAPrivateKey(pemRepresentation: pkcs1PEM).publicKey.pemRepresentation
                == key.publicKey.pemRepresentation)

        let message = Array("eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0".utf8)
        try Data(message).write(to: URL(fileURLWithPath: dir.path("message")))
        let signed = try Subprocess.run(
            openssl,
            ["dgst", "-sha256", "-sign", dir.path("key.pem"), "-out", dir.path("sig"), dir.path("message")])
        try #require(signed.status == 0, "\(signed.stderr)")
        let signature = [UInt8](try Data(contentsOf: URL(fileURLWithPath: dir.path("sig"))))
        #expect(key.publicKey.isValidRS256Signature(signature, for: message))
        // PKCS#1 v1.5 is deterministic: ours is byte-for-byte the CLI's.
        #expect(try key.signatureRS256(for: message) == signature)

        // And the CLI verifies ours against the public key we write.
        try key.publicKey.pemRepresentation.write(toFile: dir.path("pub.pem"), atomically: true, encoding: .utf8)
        try Data(try key.signatureRS256(for: message)).write(to: URL(fileURLWithPath: dir.path("ours")))
        let verified = try Subprocess.run(
            openssl,
            [
                "dgst", "-sha256", "-verify", dir.path("pub.pem"), "-signature", dir.path("ours"),
                dir.path("message"),
            ])
        #expect(verified.status == 0, "\(verified.stdout) \(verified.stderr)")
    }
}
