import COpenSSL
import Foundation

/// An EVP_PKEY handle, freed on release.
final class EVPKey: @unchecked Sendable {  // the key is never mutated after creation; each use makes its own context
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { EVP_PKEY_free(pointer) }
}

/// A NIST P-256 private key (the curve of ES256 and of APNs signing keys).
public struct P256PrivateKey: Sendable {
    let key: EVPKey

    /// Generates a new random key.
    public init() throws {
        guard let context = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nil) else { throw CryptoError.openSSL("key generation") }
        defer { EVP_PKEY_CTX_free(context) }
        var pkey: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1,
            EVP_PKEY_CTX_set_ec_paramgen_curve_nid(context, NID_X9_62_prime256v1) == 1,
            EVP_PKEY_keygen(context, &pkey) == 1, let pkey
        else { throw CryptoError.openSSL("key generation") }
        key = EVPKey(pkey)
    }

    /// Reads a PEM private key: PKCS#8 (`BEGIN PRIVATE KEY`, Apple's `.p8` format) or SEC1 (`BEGIN EC PRIVATE KEY`).
    public init(pemRepresentation pem: String) throws {
        guard let pkey = MemoryBIO.read(pem, { PEM_read_bio_PrivateKey($0, nil, nil, nil) }) else {
            throw CryptoError.openSSL("reading a private key")
        }
        guard EVP_PKEY_get_base_id(pkey) == EVP_PKEY_EC, EVP_PKEY_get_bits(pkey) == 256 else {
            EVP_PKEY_free(pkey)
            throw CryptoError("reading a private key", reason: "not a P-256 key")
        }
        key = EVPKey(pkey)
    }

    /// The key as unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), the format of an APNs `.p8` file.
    public var pemRepresentation: String {
        get throws {
            try MemoryBIO.write("writing a private key") {
                PEM_write_bio_PrivateKey($0, key.pointer, nil, nil, 0, nil, nil)
            }
        }
    }

    /// The matching public key.
    public var publicKey: P256PublicKey {
        get throws { try P256PublicKey(rawRepresentation: rawPublicKey) }
    }

    /// An ECDSA P-256 / SHA-256 signature of `message` in the raw 64-byte `r‖s` form JWS uses.
    public func signature(for message: some Collection<UInt8>) throws -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw CryptoError.openSSL("signing") }
        defer { EVP_MD_CTX_free(context) }
        let bytes = Array(message)
        var der = [UInt8](repeating: 0, count: 80)
        var derLength = der.count
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key.pointer) == 1,
            EVP_DigestSign(context, &der, &derLength, bytes, bytes.count) == 1
        else { throw CryptoError.openSSL("signing") }
        return try der.withUnsafeBufferPointer { buffer -> [UInt8] in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            guard let signature = d2i_ECDSA_SIG(nil, &cursor, derLength) else { throw CryptoError.openSSL("signing") }
            defer { ECDSA_SIG_free(signature) }
            var r: OpaquePointer?
            var s: OpaquePointer?
            ECDSA_SIG_get0(signature, &r, &s)
            var raw = [UInt8](repeating: 0, count: 64)
            guard BN_bn2binpad(r, &raw, 32) == 32 else { throw CryptoError.openSSL("signing") }
            let written = raw.withUnsafeMutableBufferPointer { BN_bn2binpad(s, $0.baseAddress! + 32, 32) }
            guard written == 32 else { throw CryptoError.openSSL("signing") }
            return raw
        }
    }
}

/// A NIST P-256 public key.
public struct P256PublicKey: Sendable {
    let key: EVPKey

    /// Reads a PEM public key (`-----BEGIN PUBLIC KEY-----`, SubjectPublicKeyInfo).
    public init(pemRepresentation pem: String) throws {
        guard let pkey = MemoryBIO.read(pem, { PEM_read_bio_PUBKEY($0, nil, nil, nil) }) else {
            throw CryptoError.openSSL("reading a public key")
        }
        guard EVP_PKEY_get_base_id(pkey) == EVP_PKEY_EC, EVP_PKEY_get_bits(pkey) == 256 else {
            EVP_PKEY_free(pkey)
            throw CryptoError("reading a public key", reason: "not a P-256 key")
        }
        key = EVPKey(pkey)
    }

    /// The key as SubjectPublicKeyInfo PEM.
    public var pemRepresentation: String {
        get throws { try MemoryBIO.write("writing a public key") { PEM_write_bio_PUBKEY($0, key.pointer) } }
    }

    /// The SHA-256 of the DER SubjectPublicKeyInfo, base64 (the form of HTTP pinning, `sha256//…`).
    public var spkiSHA256Base64: String {
        get throws {
            let length = i2d_PUBKEY(key.pointer, nil)
            guard length > 0 else { throw CryptoError.openSSL("encoding a public key") }
            var der = [UInt8](repeating: 0, count: Int(length))
            try der.withUnsafeMutableBufferPointer { buffer in
                var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
                guard i2d_PUBKEY(key.pointer, &cursor) == length else {
                    throw CryptoError.openSSL("encoding a public key")
                }
            }
            return Base64Standard.encode(SHA256.hash(der))
        }
    }

    /// Whether `signature` (raw 64-byte `r‖s`) is a valid ECDSA P-256 / SHA-256 signature of `message`.
    public func isValidSignature(_ signature: some Collection<UInt8>, for message: some Collection<UInt8>) -> Bool {
        let raw = Array(signature)
        guard raw.count == 64, let sig = ECDSA_SIG_new() else { return false }
        defer { ECDSA_SIG_free(sig) }
        let r = BN_bin2bn(raw, 32, nil)
        let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard ECDSA_SIG_set0(sig, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return false
        }
        let length = i2d_ECDSA_SIG(sig, nil)
        guard length > 0 else { return false }
        var der = [UInt8](repeating: 0, count: Int(length))
        let encoded = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return i2d_ECDSA_SIG(sig, &cursor)
        }
        guard encoded == length, let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        let bytes = Array(message)
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key.pointer) == 1 else {
            ERR_clear_error()
            return false
        }
        let ok = EVP_DigestVerify(context, der, der.count, bytes, bytes.count) == 1
        ERR_clear_error()
        return ok
    }
}

/// Standard padded base64.
enum Base64Standard {
    static func encode(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }
}
