import COpenSSL

extension P256PublicKey {
    /// Reads a public key from its uncompressed point, `0x04 ‖ X ‖ Y` (65 bytes): the form of Web Push's `p256dh`
    /// and of a VAPID `k`. Throws for any other length or a point that is not on the curve.
    ///
    /// Built from parameters (`EVP_PKEY_fromdata`, which checks the point is on the curve) rather than decoded
    /// from DER: OpenSSL 3's decoders search every provider's decoders on each call, which made one message's
    /// encryption cost several hundred microseconds.
    public init(rawRepresentation raw: some Collection<UInt8>) throws {
        var point = Array(raw)
        guard point.count == 65, point[0] == 0x04 else {
            throw CryptoError("reading a public key", reason: "not an uncompressed P-256 point")
        }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
            throw CryptoError.openSSL("reading a public key")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var pkey: OpaquePointer?
        let made = "group".withCString { groupKey in
            "prime256v1".withCString { group in
                "pub".withCString { pubKey in
                    point.withUnsafeMutableBytes { bytes -> Int32 in
                        var params = [
                            OSSL_PARAM_construct_utf8_string(groupKey, UnsafeMutablePointer(mutating: group), 0),
                            OSSL_PARAM_construct_octet_string(pubKey, bytes.baseAddress, bytes.count),
                            OSSL_PARAM_construct_end(),
                        ]
                        guard EVP_PKEY_fromdata_init(context) == 1 else { return 0 }
                        return EVP_PKEY_fromdata(context, &pkey, Self.publicKeySelection, &params)
                    }
                }
            }
        }
        guard made == 1, let pkey else {
            ERR_clear_error()
            throw CryptoError("reading a public key", reason: "not a point on P-256")
        }
        key = EVPKey(pkey)
    }

    /// `EVP_PKEY_PUBLIC_KEY` (a macro Swift does not import): the public key with its domain and other
    /// parameters.
    private static let publicKeySelection =
        OSSL_KEYMGMT_SELECT_PUBLIC_KEY | OSSL_KEYMGMT_SELECT_DOMAIN_PARAMETERS | OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS

    /// The uncompressed point, `0x04 ‖ X ‖ Y` (65 bytes).
    public var rawRepresentation: [UInt8] {
        get throws { try Self.rawPoint(of: key) }
    }

    /// The public point of `key` (a public key or a key pair), read as the key's encoded-public-key parameter
    /// (uncompressed for EC keys).
    static func rawPoint(of key: EVPKey) throws -> [UInt8] {
        var point = [UInt8](repeating: 0, count: 65)
        var length = 0
        let read = "encoded-pub-key".withCString { name in
            EVP_PKEY_get_octet_string_param(key.pointer, name, &point, point.count, &length)
        }
        guard read == 1, length == 65, point[0] == 0x04 else { throw CryptoError.openSSL("encoding a public key") }
        return point
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
    ///
    /// The peer is not validated again here: every ``P256PublicKey`` was checked to be a point on the curve when it
    /// was made, and P-256's cofactor is 1, so OpenSSL's default check (which multiplies the point by the group
    /// order, a second scalar multiplication) would only double the cost.
    public func sharedSecret(with peer: P256PublicKey) throws -> [UInt8] {
        guard let context = EVP_PKEY_CTX_new(key.pointer, nil) else { throw CryptoError.openSSL("key agreement") }
        defer { EVP_PKEY_CTX_free(context) }
        var length = 0
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer_ex(context, peer.key.pointer, 0) == 1,
            EVP_PKEY_derive(context, nil, &length) == 1, length == 32
        else { throw CryptoError.openSSL("key agreement") }
        var secret = [UInt8](repeating: 0, count: length)
        guard EVP_PKEY_derive(context, &secret, &length) == 1, length == 32 else {
            throw CryptoError.openSSL("key agreement")
        }
        return secret
    }
}
