import COpenSSL

/// AES-128-GCM with a 12-byte nonce and a 16-byte tag appended to the ciphertext (the layout of RFC 8188 records).
public enum AES128GCM {
    /// The tag's length.
    public static let tagLength = 16

    /// Encrypts `plaintext`; the result is the ciphertext followed by the tag.
    public static func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8]) throws -> [UInt8] {
        guard key.count == 16, nonce.count == 12 else { throw CryptoError("encrypting", reason: "bad key or nonce") }
        guard let context = EVP_CIPHER_CTX_new() else { throw CryptoError.openSSL("encrypting") }
        defer { EVP_CIPHER_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: plaintext.count + tagLength)
        var written: Int32 = 0
        var final: Int32 = 0
        let ok = out.withUnsafeMutableBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress,
                EVP_EncryptInit_ex(context, EVP_aes_128_gcm(), nil, key, nonce) == 1,
                EVP_EncryptUpdate(context, base, &written, plaintext, Int32(plaintext.count)) == 1,
                EVP_EncryptFinal_ex(context, base + Int(written), &final) == 1,
                EVP_CIPHER_CTX_ctrl(
                    context, EVP_CTRL_GCM_GET_TAG, Int32(tagLength), base + plaintext.count) == 1
            else { return false }
            return true
        }
        guard ok, Int(written + final) == plaintext.count else { throw CryptoError.openSSL("encrypting") }
        return out
    }

    /// Decrypts ciphertext-and-tag; throws when the tag does not verify.
    public static func open(_ sealed: some Collection<UInt8>, key: [UInt8], nonce: [UInt8]) throws -> [UInt8] {
        let bytes = Array(sealed)
        guard key.count == 16, nonce.count == 12, bytes.count >= tagLength else {
            throw CryptoError("decrypting", reason: "bad key, nonce or length")
        }
        guard let context = EVP_CIPHER_CTX_new() else { throw CryptoError.openSSL("decrypting") }
        defer { EVP_CIPHER_CTX_free(context) }
        let cipherLength = bytes.count - tagLength
        var tag = Array(bytes[cipherLength...])
        var out = [UInt8](repeating: 0, count: max(cipherLength, 1))
        var written: Int32 = 0
        var final: Int32 = 0
        let ok = out.withUnsafeMutableBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress,
                EVP_DecryptInit_ex(context, EVP_aes_128_gcm(), nil, key, nonce) == 1,
                EVP_DecryptUpdate(context, base, &written, bytes, Int32(cipherLength)) == 1,
                EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, Int32(tagLength), &tag) == 1,
                EVP_DecryptFinal_ex(context, base + Int(written), &final) == 1
            else { return false }
            return true
        }
        ERR_clear_error()
        guard ok else { throw CryptoError("decrypting", reason: "the authentication tag does not verify") }
        return Array(out.prefix(Int(written + final)))
    }
}

/// HKDF with HMAC-SHA256 (RFC 5869), for outputs of at most one block (32 bytes), as RFC 8291 uses it.
public enum HKDFSHA256 {
    /// The pseudorandom key of `inputKey` under `salt`.
    public static func extract(salt: [UInt8], inputKey: [UInt8]) -> [UInt8] {
        HMACSHA256.authenticationCode(for: inputKey, key: salt)
    }

    /// The first `length` (≤ 32) bytes of the expansion of `key` with `info`.
    public static func expand(key: [UInt8], info: [UInt8], length: Int) -> [UInt8] {
        precondition(length <= 32, "one HMAC block")
        return Array(HMACSHA256.authenticationCode(for: info + [0x01], key: key).prefix(length))
    }
}
