import OpenSSLCrypto
import Testing

/// RFC 8291 Appendix A, reproduced byte for byte, and the checks a receiver makes.
@Suite struct WebPushEncryptionTests {
    static let plaintext = Array("When I grow up, I want to be a watermelon".utf8)
    static let senderPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
    static let senderPublic =
        "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let receiverPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
    static let receiverPublic =
        "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let salt = "DGv6ra1nlYgDCS1FRnbzlw"
    static let auth = "BTBZMqHH6r4Tts7J_aSIgg"
    static let body =
        "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27ml"
        + "mlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPT"
        + "pK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"

    static func bytes(_ text: String) -> [UInt8] { Base64URL.decode(text)! }

    @Test func rawKeysRoundTripTheVectorsPoints() throws {
        let sender = try P256PrivateKey(rawScalar: Self.bytes(Self.senderPrivate))
        #expect(Base64URL.encode(try sender.publicKey.rawRepresentation) == Self.senderPublic)
        let receiver = try P256PublicKey(rawRepresentation: Self.bytes(Self.receiverPublic))
        #expect(Base64URL.encode(try receiver.rawRepresentation) == Self.receiverPublic)
    }

    @Test func encryptionReproducesAppendixA() throws {
        let body = try WebPushEncryption.encrypt(
            Self.plaintext, receiverKey: try P256PublicKey(rawRepresentation: Self.bytes(Self.receiverPublic)),
            authSecret: Self.bytes(Self.auth), bodyLength: 144,
            senderKey: try P256PrivateKey(rawScalar: Self.bytes(Self.senderPrivate)), salt: Self.bytes(Self.salt))
        #expect(body.count == 144)
        #expect(Base64URL.encode(body) == Self.body)
    }

    @Test func decryptionReadsAppendixA() throws {
        let receiver = try P256PrivateKey(rawScalar: Self.bytes(Self.receiverPrivate))
        let decrypted = try WebPushEncryption.decrypt(
            Self.bytes(Self.body), receiverKey: receiver, authSecret: Self.bytes(Self.auth))
        #expect(decrypted.plaintext == Self.plaintext)
        #expect(decrypted.paddingLength == 0)
        #expect(decrypted.recordSize == 4096)
        #expect(Base64URL.encode(decrypted.senderPublicKey) == Self.senderPublic)
    }

    @Test func paddingMakesEveryBodyTheSameLength() throws {
        let receiver = try P256PrivateKey()
        let auth = SecureRandom.bytes(16)
        var lengths: Set<Int> = []
        for text in ["{}", #"{"acct":"a","st":"b"}"#, String(repeating: "x", count: 200)] {
            let body = try WebPushEncryption.encrypt(
                Array(text.utf8), receiverKey: try receiver.publicKey, authSecret: auth, bodyLength: 400)
            lengths.insert(body.count)
            let decrypted = try WebPushEncryption.decrypt(body, receiverKey: receiver, authSecret: auth)
            #expect(decrypted.plaintext == Array(text.utf8))
            #expect(decrypted.paddingLength == 400 - WebPushEncryption.headerLength - 17 - text.utf8.count)
        }
        #expect(lengths == [400])
    }

    @Test func eachMessageHasAFreshKeyAndSalt() throws {
        let receiver = try P256PrivateKey()
        let auth = SecureRandom.bytes(16)
        let first = try WebPushEncryption.encrypt(
            Self.plaintext, receiverKey: try receiver.publicKey, authSecret: auth, bodyLength: 200)
        let second = try WebPushEncryption.encrypt(
            Self.plaintext, receiverKey: try receiver.publicKey, authSecret: auth, bodyLength: 200)
        #expect(first[0..<16] != second[0..<16])
        #expect(first[21..<86] != second[21..<86])
    }

    @Test func aReceiverRefusesWhatIsNotOneGoodRecord() throws {
        let receiver = try P256PrivateKey()
        let auth = SecureRandom.bytes(16)
        let body = try WebPushEncryption.encrypt(
            Self.plaintext, receiverKey: try receiver.publicKey, authSecret: auth, bodyLength: 200)
        #expect(throws: WebPushEncryption.DecryptionError.authentication) {
            try WebPushEncryption.decrypt(body, receiverKey: receiver, authSecret: SecureRandom.bytes(16))
        }
        var changed = body
        changed[150] ^= 1
        #expect(throws: WebPushEncryption.DecryptionError.authentication) {
            try WebPushEncryption.decrypt(changed, receiverKey: receiver, authSecret: auth)
        }
        var small = body
        small[16..<20] = [0, 0, 0, 20]
        #expect(throws: WebPushEncryption.DecryptionError.multipleRecords) {
            try WebPushEncryption.decrypt(small, receiverKey: receiver, authSecret: auth)
        }
        var badKeyID = body
        badKeyID[20] = 64
        #expect(throws: WebPushEncryption.DecryptionError.self) {
            try WebPushEncryption.decrypt(badKeyID, receiverKey: receiver, authSecret: auth)
        }
        #expect(throws: WebPushEncryption.DecryptionError.self) {
            try WebPushEncryption.decrypt(body.prefix(90), receiverKey: receiver, authSecret: auth)
        }
    }

    @Test func aPointOffTheCurveIsRefused() {
        var point = Self.bytes(Self.receiverPublic)
        point[40] ^= 0xff
        #expect(throws: CryptoError.self) { try P256PublicKey(rawRepresentation: point) }
        #expect(throws: CryptoError.self) { try P256PublicKey(rawRepresentation: point.prefix(33)) }
    }

    @Test func vapidTokensVerifyWithTheRawPublicKey() throws {
        let key = try P256PrivateKey()
        let token = try JWT.makeES256(
            claims: [
                "aud": .string("https://push.example"), "exp": .integer(2_000_000_000), "sub": .string("mailto:a@b"),
            ],
            key: key)
        let raw = try key.publicKey.rawRepresentation
        let decoded = try JWT.verifyES256General(token, key: try P256PublicKey(rawRepresentation: raw))
        #expect(decoded[claim: "aud"] == .string("https://push.example"))
        #expect(throws: JWTError.invalidSignature) {
            try JWT.verifyES256General(token, key: try P256PrivateKey().publicKey)
        }
    }
}
