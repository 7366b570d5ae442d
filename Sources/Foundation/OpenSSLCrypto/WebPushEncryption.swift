/// Message encryption for Web Push (RFC 8291) in the `aes128gcm` content coding (RFC 8188), one record.
///
/// The sender makes a fresh P-256 key and salt per message; with the subscription's public key (`p256dh`) and
/// auth secret they give the content key and nonce:
///
/// ```
/// PRK_key = HMAC(auth, ECDH(sender, receiver))
/// IKM     = HMAC(PRK_key, "WebPush: info" ‖ 0 ‖ receiver public ‖ sender public ‖ 1)
/// PRK     = HMAC(salt, IKM)
/// CEK     = HMAC(PRK, "Content-Encoding: aes128gcm" ‖ 0 ‖ 1)[0..<16]
/// NONCE   = HMAC(PRK, "Content-Encoding: nonce" ‖ 0 ‖ 1)[0..<12]
/// body    = salt(16) ‖ rs(4, big-endian) ‖ 65 ‖ sender public(65) ‖ AES-GCM(plaintext ‖ 2 ‖ zeros)
/// ```
public enum WebPushEncryption {
    /// The length of the `aes128gcm` header with a P-256 key id: 16 + 4 + 1 + 65.
    public static let headerLength = 86
    /// What one record adds to its plaintext: the delimiter and the tag.
    public static let recordOverhead = 1 + AES128GCM.tagLength

    /// The body for `plaintext`, padded so that the body is exactly `bodyLength` bytes (at least
    /// `headerLength + plaintext.count + recordOverhead`). `senderKey` and `salt` are fresh when not given (the
    /// test vectors give them).
    public static func encrypt(
        _ plaintext: [UInt8], receiverKey: P256PublicKey, authSecret: [UInt8], bodyLength: Int,
        recordSize: UInt32 = 4096, senderKey: P256PrivateKey? = nil, salt: [UInt8]? = nil
    ) throws -> [UInt8] {
        let recordLength = bodyLength - headerLength
        guard recordLength >= plaintext.count + recordOverhead, recordLength <= Int(recordSize) else {
            throw CryptoError("encrypting", reason: "the plaintext does not fit the body length")
        }
        guard authSecret.count == 16 else { throw CryptoError("encrypting", reason: "the auth secret is not 16 bytes") }
        let sender = try senderKey ?? P256PrivateKey()
        let salt = salt ?? SecureRandom.bytes(16)
        guard salt.count == 16 else { throw CryptoError("encrypting", reason: "the salt is not 16 bytes") }
        let senderPublic = try sender.rawPublicKey
        let keys = try contentKeys(
            secret: try sender.sharedSecret(with: receiverKey), authSecret: authSecret,
            receiverPublic: try receiverKey.rawRepresentation, senderPublic: senderPublic, salt: salt)
        var record = plaintext
        record.reserveCapacity(recordLength - AES128GCM.tagLength)
        record.append(0x02)
        record.append(contentsOf: repeatElement(0, count: recordLength - AES128GCM.tagLength - record.count))
        var body = salt
        body.reserveCapacity(bodyLength)
        body += [
            UInt8(truncatingIfNeeded: recordSize >> 24), UInt8(truncatingIfNeeded: recordSize >> 16),
            UInt8(truncatingIfNeeded: recordSize >> 8), UInt8(truncatingIfNeeded: recordSize),
        ]
        body.append(65)
        body += senderPublic
        body += try AES128GCM.seal(record, key: keys.cek, nonce: keys.nonce)
        return body
    }

    /// A decrypted message and what its layout was.
    public struct Decrypted: Sendable, Equatable {
        /// The plaintext, without delimiter and padding.
        public var plaintext: [UInt8]
        /// The zero bytes that followed the delimiter.
        public var paddingLength: Int
        /// The header's record size.
        public var recordSize: UInt32
        /// The sender's public key (the header's key id).
        public var senderPublicKey: [UInt8]
    }

    /// Why a body does not decrypt, as a push service or browser would say it.
    public enum DecryptionError: Error, Sendable, Equatable, CustomStringConvertible {
        /// Shorter than the header, a key id that is not a 65-byte point, or a record size below 18.
        case header(String)
        /// More than one record (the body is longer than the record size, or the delimiter is 1).
        case multipleRecords
        /// The authentication tag does not verify (wrong keys, or a changed body).
        case authentication
        /// No delimiter after the plaintext, or a delimiter other than 2.
        case delimiter

        /// What is wrong, for logs and errors.
        public var description: String {
            switch self {
            case .header(let why): "aes128gcm header: \(why)"
            case .multipleRecords: "more than one record"
            case .authentication: "the authentication tag does not verify"
            case .delimiter: "no last-record delimiter (0x02) after the plaintext"
            }
        }
    }

    /// Decrypts a one-record body for the subscription whose private key is `receiverKey`.
    public static func decrypt(
        _ body: some Collection<UInt8>, receiverKey: P256PrivateKey, authSecret: [UInt8]
    ) throws(DecryptionError) -> Decrypted {
        let bytes = Array(body)
        guard bytes.count >= headerLength + AES128GCM.tagLength + 1 else { throw .header("too short") }
        let salt = Array(bytes[0..<16])
        let recordSize = bytes[16..<20].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard recordSize >= 18 else { throw .header("record size below 18") }
        guard bytes[20] == 65 else { throw .header("key id is not a 65-byte P-256 point") }
        let senderPublic = Array(bytes[21..<headerLength])
        guard bytes.count - headerLength <= Int(recordSize) else { throw .multipleRecords }
        let sender: P256PublicKey
        let keys: (cek: [UInt8], nonce: [UInt8])
        do {
            sender = try P256PublicKey(rawRepresentation: senderPublic)
            keys = try contentKeys(
                secret: try receiverKey.sharedSecret(with: sender), authSecret: authSecret,
                receiverPublic: try receiverKey.rawPublicKey, senderPublic: senderPublic, salt: salt)
        } catch {
            throw .header("key id is not a point on P-256")
        }
        let record: [UInt8]
        do {
            record = try AES128GCM.open(bytes[headerLength...], key: keys.cek, nonce: keys.nonce)
        } catch {
            throw .authentication
        }
        guard let last = record.lastIndex(where: { $0 != 0 }) else { throw .delimiter }
        switch record[last] {
        case 0x02: break
        case 0x01: throw .multipleRecords
        default: throw .delimiter
        }
        return Decrypted(
            plaintext: Array(record[..<last]), paddingLength: record.count - last - 1, recordSize: recordSize,
            senderPublicKey: senderPublic)
    }

    /// The content-encryption key and nonce of RFC 8291 §3.3–3.4 and RFC 8188 §2.2–2.3 (record 0).
    static func contentKeys(
        secret: [UInt8], authSecret: [UInt8], receiverPublic: [UInt8], senderPublic: [UInt8], salt: [UInt8]
    ) throws -> (cek: [UInt8], nonce: [UInt8]) {
        let prkKey = HKDFSHA256.extract(salt: authSecret, inputKey: secret)
        let keyInfo = Array("WebPush: info".utf8) + [0] + receiverPublic + senderPublic
        let ikm = HKDFSHA256.expand(key: prkKey, info: keyInfo, length: 32)
        let prk = HKDFSHA256.extract(salt: salt, inputKey: ikm)
        let cek = HKDFSHA256.expand(key: prk, info: Array("Content-Encoding: aes128gcm".utf8) + [0], length: 16)
        let nonce = HKDFSHA256.expand(key: prk, info: Array("Content-Encoding: nonce".utf8) + [0], length: 12)
        return (cek, nonce)
    }
}
