import COpenSSL

/// SHA-256.
public enum SHA256 {
    /// The 32-byte SHA-256 digest of `bytes`.
    public static func hash(_ bytes: some Collection<UInt8>) -> [UInt8] { digest(bytes, FetchedDigest.sha256, 32) }

    /// The SHA-256 digest of the UTF-8 bytes of `string`.
    public static func hash(_ string: String) -> [UInt8] { hash(Array(string.utf8)) }
}

/// SHA-1, for protocols that still name it where no secrecy rests on it (RFC 6455's `Sec-WebSocket-Accept`).
public enum SHA1 {
    /// The 20-byte SHA-1 digest of `bytes`.
    public static func hash(_ bytes: some Collection<UInt8>) -> [UInt8] { digest(bytes, FetchedDigest.sha1, 20) }
}

/// The digests' implementations, fetched from OpenSSL's default provider once. `EVP_sha256()` and its kind are
/// OpenSSL 1's names: OpenSSL 3 looks the provider's implementation up for each digest made with them (a lock and a
/// table), which cost more than hashing the short inputs here (a trace's ids are two SHA-256s of a few dozen bytes,
/// made for every change). A fetched digest is read-only and shared by every thread.
enum FetchedDigest {
    nonisolated(unsafe) static let sha256: OpaquePointer? = EVP_MD_fetch(nil, "SHA2-256", nil) ?? EVP_sha256()
    nonisolated(unsafe) static let sha1: OpaquePointer? = EVP_MD_fetch(nil, "SHA1", nil) ?? EVP_sha1()
}

/// The `size`-byte digest of `bytes` with `algorithm`.
private func digest(_ bytes: some Collection<UInt8>, _ algorithm: OpaquePointer?, _ size: Int) -> [UInt8] {
    var digest = [UInt8](repeating: 0, count: size)
    var length: UInt32 = 0
    let ok = Array(bytes).withUnsafeBytes { input in
        EVP_Digest(input.baseAddress, input.count, &digest, &length, algorithm, nil)
    }
    precondition(ok == 1 && Int(length) == size, "EVP_Digest failed")
    return digest
}

/// HMAC with SHA-256.
public enum HMACSHA256 {
    /// The 32-byte HMAC-SHA256 of `message` under `key`.
    public static func authenticationCode(for message: some Collection<UInt8>, key: some Collection<UInt8>) -> [UInt8] {
        var mac = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let keyBytes = Array(key)
        let messageBytes = Array(message)
        let result = keyBytes.withUnsafeBytes { k in
            messageBytes.withUnsafeBytes { m in
                HMAC(
                    FetchedDigest.sha256, k.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(k.count),
                    m.baseAddress?.assumingMemoryBound(to: UInt8.self), m.count, &mac, &length)
            }
        }
        precondition(result != nil && length == 32, "HMAC-SHA256 failed")
        return mac
    }
}

/// Comparisons that take the same time whatever the inputs' contents.
public enum ConstantTime {
    /// Whether `a` and `b` are equal, in time that depends only on their lengths.
    public static func equals(_ a: some Collection<UInt8>, _ b: some Collection<UInt8>) -> Bool {
        let left = Array(a)
        let right = Array(b)
        guard left.count == right.count else { return false }
        if left.isEmpty { return true }
        return left.withUnsafeBytes { l in
            right.withUnsafeBytes { r in CRYPTO_memcmp(l.baseAddress, r.baseAddress, l.count) == 0 }
        }
    }
}

/// Cryptographically secure random bytes from OpenSSL's DRBG.
public enum SecureRandom {
    /// `count` random bytes.
    public static func bytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        guard count > 0 else { return bytes }
        precondition(RAND_bytes(&bytes, Int32(count)) == 1, "RAND_bytes failed")
        return bytes
    }

    /// `count` random bytes as lowercase hex (2 × `count` characters).
    public static func hex(_ count: Int) -> String { Hex.encode(bytes(count)) }

    /// `count` random bytes as unpadded base64url.
    public static func base64URL(_ count: Int) -> String { Base64URL.encode(bytes(count)) }
}
