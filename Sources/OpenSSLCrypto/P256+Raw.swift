import COpenSSL

/// The fixed DER prefix of a SubjectPublicKeyInfo holding an uncompressed P-256 point: the algorithm
/// (id-ecPublicKey, prime256v1) and the BIT STRING header of the 65 bytes that follow.
private let p256SPKIPrefix: [UInt8] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce,
    0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
]

extension P256PublicKey {
    /// Reads a public key from its uncompressed point, `0x04 ‖ X ‖ Y` (65 bytes): the form of Web Push's `p256dh`
    /// and of a VAPID `k`. Throws for any other length or a point that is not on the curve.
    public init(rawRepresentation raw: some Collection<UInt8>) throws {
        let point = Array(raw)
        guard point.count == 65, point[0] == 0x04 else {
            throw CryptoError("reading a public key", reason: "not an uncompressed P-256 point")
        }
        let der = p256SPKIPrefix + point
        let pkey = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PUBKEY(nil, &cursor, buffer.count)
        }
        guard let pkey else {
            ERR_clear_error()
            throw CryptoError("reading a public key", reason: "not a point on P-256")
        }
        key = EVPKey(pkey)
    }

    /// The uncompressed point, `0x04 ‖ X ‖ Y` (65 bytes).
    public var rawRepresentation: [UInt8] {
        get throws { try Self.rawPoint(of: key) }
    }

    /// The public point of `key` (a public key or a key pair), from its DER SubjectPublicKeyInfo.
    static func rawPoint(of key: EVPKey) throws -> [UInt8] {
        let length = i2d_PUBKEY(key.pointer, nil)
        guard length == Int32(p256SPKIPrefix.count + 65) else { throw CryptoError.openSSL("encoding a public key") }
        var der = [UInt8](repeating: 0, count: Int(length))
        try der.withUnsafeMutableBufferPointer { buffer in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            guard i2d_PUBKEY(key.pointer, &cursor) == length else {
                throw CryptoError.openSSL("encoding a public key")
            }
        }
        return Array(der.suffix(65))
    }
}

extension P256PrivateKey {
    /// The public key's uncompressed point, `0x04 ‖ X ‖ Y` (65 bytes), read straight from the key pair.
    public var rawPublicKey: [UInt8] {
        get throws { try P256PublicKey.rawPoint(of: key) }
    }

    /// Reads a private key from its 32-byte scalar (the form of the RFC 8291 test vectors); the public key is
    /// computed from it.
    public init(rawScalar scalar: some Collection<UInt8>) throws {
        let bytes = Array(scalar)
        guard bytes.count == 32 else { throw CryptoError("reading a private key", reason: "not a 32-byte scalar") }
        // SEC1 ECPrivateKey { version 1, privateKey OCTET STRING, [0] prime256v1 }; OpenSSL derives the public
        // key when the optional [1] field is absent.
        let der: [UInt8] =
            [0x30, 0x31, 0x02, 0x01, 0x01, 0x04, 0x20] + bytes
            + [0xa0, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07]
        let pkey = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PrivateKey(EVP_PKEY_EC, nil, &cursor, buffer.count)
        }
        guard let pkey else {
            ERR_clear_error()
            throw CryptoError("reading a private key", reason: "not a P-256 scalar")
        }
        key = EVPKey(pkey)
    }

    /// The ECDH shared secret with `peer` (the 32-byte X coordinate of the shared point).
    public func sharedSecret(with peer: P256PublicKey) throws -> [UInt8] {
        guard let context = EVP_PKEY_CTX_new(key.pointer, nil) else { throw CryptoError.openSSL("key agreement") }
        defer { EVP_PKEY_CTX_free(context) }
        var length = 0
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer(context, peer.key.pointer) == 1,
            EVP_PKEY_derive(context, nil, &length) == 1, length == 32
        else { throw CryptoError.openSSL("key agreement") }
        var secret = [UInt8](repeating: 0, count: length)
        guard EVP_PKEY_derive(context, &secret, &length) == 1, length == 32 else {
            throw CryptoError.openSSL("key agreement")
        }
        return secret
    }
}
