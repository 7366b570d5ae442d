import Foundation
import OpenSSLCrypto
import TestSupport
import Testing

@Suite struct JWTTests {
    @Test func roundTripAndClaims() throws {
        let key = try P256PrivateKey()
        let claims = JWTClaims(keyID: "ABC123DEFG", issuer: "DEF123GHIJ", issuedAt: 1_437_179_036)
        let token = try JWT.makeES256(claims: claims, key: key)
        #expect(try JWT.verifyES256(token, key: try key.publicKey) == claims)
        #expect(try JWT.decodeUnverified(token) == claims)
        let header = try #require(Base64URL.decode(token.split(separator: ".")[0]))
        #expect(String(decoding: header, as: UTF8.self) == #"{"alg":"ES256","kid":"ABC123DEFG"}"#)
        let payload = try #require(Base64URL.decode(token.split(separator: ".")[1]))
        #expect(String(decoding: payload, as: UTF8.self) == #"{"iss":"DEF123GHIJ","iat":1437179036}"#)
        #expect(try #require(Base64URL.decode(token.split(separator: ".")[2])).count == 64)
    }

    @Test func tamperedOrForeignTokensAreRejected() throws {
        let key = try P256PrivateKey()
        let other = try P256PrivateKey()
        let token = try JWT.makeES256(claims: JWTClaims(keyID: "K", issuer: "T", issuedAt: 100), key: key)
        #expect(throws: JWTError.invalidSignature) { try JWT.verifyES256(token, key: try other.publicKey) }

        var parts = token.split(separator: ".").map(String.init)
        parts[1] = Base64URL.encode(Array(#"{"iss":"T","iat":101}"#.utf8))
        #expect(throws: JWTError.invalidSignature) {
            try JWT.verifyES256(parts.joined(separator: "."), key: try key.publicKey)
        }

        var signature = try #require(Base64URL.decode(token.split(separator: ".")[2]))
        signature[10] ^= 0x01
        let flipped = token.split(separator: ".")[0...1].joined(separator: ".") + "." + Base64URL.encode(signature)
        #expect(throws: JWTError.invalidSignature) { try JWT.verifyES256(flipped, key: try key.publicKey) }

        #expect(throws: JWTError.self) { try JWT.verifyES256("a.b", key: try key.publicKey) }
        #expect(throws: JWTError.self) { try JWT.verifyES256("!!.??.**", key: try key.publicKey) }
        let none = Base64URL.encode(Array(#"{"alg":"none","kid":"K"}"#.utf8)) + "." + parts[1] + "."
        #expect(throws: JWTError.unsupportedAlgorithm("none")) { try JWT.verifyES256(none, key: try key.publicKey) }
    }

    @Test func pemRoundTripKeepsTheKey() throws {
        let key = try P256PrivateKey()
        let pem = try key.pemRepresentation
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let reloaded = try P256PrivateKey(pemRepresentation: pem)
        let token = try JWT.makeES256(claims: JWTClaims(keyID: "K", issuer: "T", issuedAt: 1), key: reloaded)
        let publicPEM = try key.publicKey.pemRepresentation
        #expect(publicPEM.hasPrefix("-----BEGIN PUBLIC KEY-----"))
        #expect(try JWT.verifyES256(token, key: try P256PublicKey(pemRepresentation: publicPEM)).issuer == "T")
        #expect(throws: CryptoError.self) { _ = try P256PrivateKey(pemRepresentation: "not a key") }
    }

    /// Independent verifier: Python's `cryptography` checks our token, and signs one we must accept.
    @Test func interoperatesWithPythonCryptography() throws {
        let python = TestEnvironment.python
        try #require(
            FileManager.default.isExecutableFile(atPath: python), "test venv missing: run Scripts/test (\(python))")
        let dir = try TemporaryDirectory()
        let key = try P256PrivateKey()
        try key.publicKey.pemRepresentation.write(toFile: dir.path("ours.pub.pem"), atomically: true, encoding: .utf8)
        let ours = try JWT.makeES256(
            claims: JWTClaims(keyID: "KEY1234567", issuer: "TEAM123456", issuedAt: 1_700_000_000), key: key)
        let result = try Subprocess.run(python, [TestEnvironment.peer("jwt_verify.py"), dir.url.path, ours])
        try #require(result.status == 0, "python failed: \(result.stderr)")
        let output = try #require(
            try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(output["ours"] as? Bool == true)
        #expect(output["tampered"] as? Bool == false)
        let theirs = try #require(output["theirs"] as? String)
        let theirKey = try P256PublicKey(
            pemRepresentation: String(contentsOfFile: dir.path("theirs.pub.pem"), encoding: .utf8))
        #expect(
            try JWT.verifyES256(theirs, key: theirKey)
                == JWTClaims(keyID: "THEIRKEY01", issuer: "THEIRTEAM1", issuedAt: 1_700_000_123))
        // Their PKCS#8 private key (the `.p8` format) loads and signs tokens their public key accepts.
        let loaded = try P256PrivateKey(
            pemRepresentation: String(contentsOfFile: dir.path("theirs.p8"), encoding: .utf8))
        let resigned = try JWT.makeES256(claims: JWTClaims(keyID: "X", issuer: "Y", issuedAt: 5), key: loaded)
        #expect(try JWT.verifyES256(resigned, key: theirKey).issuer == "Y")
        #expect(throws: JWTError.invalidSignature) { try JWT.verifyES256(theirs, key: try key.publicKey) }
    }
}
