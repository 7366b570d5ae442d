import COpenSSL

/// An RSA private key (Google service accounts use 2048-bit keys, PKCS#8 PEM).
public struct RSAPrivateKey: Sendable {
    let key: EVPKey
    /// The key as unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), the format of a service account's
    /// `private_key`.
    public let pemRepresentation: String
    /// The matching public key.
    public let publicKey: RSAPublicKey

    /// Generates a new random key of `bits` bits (at least 2048) with public exponent 65537.
    public init(bits: Int = 2048) throws {
        guard bits >= 2048, bits <= 16384 else {
            throw CryptoError("key generation", reason: "RSA keys must have 2048 to 16384 bits")
        }
        guard let context = EVP_PKEY_CTX_new_id(EVP_PKEY_RSA, nil) else {
            throw CryptoError.openSSL("key generation")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var pkey: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_CTX_set_rsa_keygen_bits(context, Int32(bits)) == 1,
            EVP_PKEY_keygen(context, &pkey) == 1, let pkey
        else { throw CryptoError.openSSL("key generation") }
        try self.init(owning: EVPKey(pkey))
    }

    /// Reads a PEM RSA private key: PKCS#8 (`BEGIN PRIVATE KEY`) or PKCS#1 (`BEGIN RSA PRIVATE KEY`). Any other
    /// kind of key is refused with a `CryptoError`.
    public init(pemRepresentation pem: String) throws {
        guard let pkey = MemoryBIO.read(pem, { PEM_read_bio_PrivateKey($0, nil, nil, nil) }) else {
            throw CryptoError.openSSL("reading a private key")
        }
        let owned = EVPKey(pkey)
        guard EVP_PKEY_get_base_id(pkey) == EVP_PKEY_RSA else {
            throw CryptoError("reading a private key", reason: "not an RSA key")
        }
        guard EVP_PKEY_get_bits(pkey) >= 1024 else {
            throw CryptoError("reading a private key", reason: "RSA key shorter than 1024 bits")
        }
        try self.init(owning: owned)
    }

    private init(owning key: EVPKey) throws {
        self.key = key
        pemRepresentation = try MemoryBIO.write("writing a private key") {
            PEM_write_bio_PrivateKey($0, key.pointer, nil, nil, 0, nil, nil)
        }
        let publicPEM = try MemoryBIO.write("writing a public key") { PEM_write_bio_PUBKEY($0, key.pointer) }
        publicKey = try RSAPublicKey(pemRepresentation: publicPEM)
    }

    /// An RSASSA-PKCS1-v1_5 / SHA-256 signature of `data` (the signature of JWS `RS256`).
    public func signatureRS256(for data: [UInt8]) throws -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw CryptoError.openSSL("signing") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key.pointer) == 1 else {
            throw CryptoError.openSSL("signing")
        }
        var length = 0
        guard EVP_DigestSign(context, nil, &length, data, data.count) == 1 else { throw CryptoError.openSSL("signing") }
        var signature = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &signature, &length, data, data.count) == 1 else {
            throw CryptoError.openSSL("signing")
        }
        return Array(signature.prefix(length))
    }
}

/// An RSA public key.
public struct RSAPublicKey: Sendable {
    let key: EVPKey
    /// The key as SubjectPublicKeyInfo PEM (`-----BEGIN PUBLIC KEY-----`).
    public let pemRepresentation: String

    /// Reads a PEM public key (`-----BEGIN PUBLIC KEY-----`, SubjectPublicKeyInfo); refuses non-RSA keys.
    public init(pemRepresentation pem: String) throws {
        guard let pkey = MemoryBIO.read(pem, { PEM_read_bio_PUBKEY($0, nil, nil, nil) }) else {
            throw CryptoError.openSSL("reading a public key")
        }
        let owned = EVPKey(pkey)
        guard EVP_PKEY_get_base_id(pkey) == EVP_PKEY_RSA else {
            throw CryptoError("reading a public key", reason: "not an RSA key")
        }
        key = owned
        pemRepresentation = try MemoryBIO.write("writing a public key") { PEM_write_bio_PUBKEY($0, pkey) }
    }

    /// Whether `signature` is a valid RSASSA-PKCS1-v1_5 / SHA-256 signature of `data`.
    public func isValidRS256Signature(_ signature: [UInt8], for data: [UInt8]) -> Bool {
        guard !signature.isEmpty, let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key.pointer) == 1 else {
            ERR_clear_error()
            return false
        }
        let ok = EVP_DigestVerify(context, signature, signature.count, data, data.count) == 1
        ERR_clear_error()
        return ok
    }
}
