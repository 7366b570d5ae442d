import COpenSSL

/// The cost parameters of scrypt (RFC 7914).
public struct ScryptParameters: Sendable, Equatable {
    /// log2 of the CPU/memory cost N.
    public var logN: Int
    /// The block size r.
    public var r: Int
    /// The parallelism p.
    public var p: Int

    /// Creates parameters.
    public init(logN: Int, r: Int, p: Int) {
        self.logN = logN
        self.r = r
        self.p = p
    }

    /// The production default: N = 2^15, r = 8, p = 1 (32 MiB, tens of milliseconds).
    public static let standard = ScryptParameters(logN: 15, r: 8, p: 1)
    /// Cheap parameters for tests only.
    public static let testing = ScryptParameters(logN: 10, r: 8, p: 1)

    /// The memory scrypt needs with these parameters, in bytes.
    var memoryBytes: UInt64 { 128 * UInt64(r) * (UInt64(1) << UInt64(logN)) + 128 * UInt64(r) * UInt64(p) }
}

/// scrypt password hashing in a self-describing, versioned encoding:
/// `$scrypt$v=1$ln=15,r=8,p=1$<salt, base64url>$<hash, base64url>`.
public enum PasswordHash {
    private static let hashLength = 32
    private static let saltLength = 16

    /// Raw scrypt: derives `length` bytes from `password` and `salt`.
    public static func scrypt(
        password: [UInt8], salt: [UInt8], parameters: ScryptParameters, length: Int
    ) throws -> [UInt8] {
        guard (1...24).contains(parameters.logN), (1...64).contains(parameters.r), (1...16).contains(parameters.p)
        else { throw CryptoError("scrypt", reason: "parameters out of range") }
        var output = [UInt8](repeating: 0, count: length)
        let ok = password.withUnsafeBufferPointer { pass in
            salt.withUnsafeBufferPointer { saltBuffer in
                pass.withMemoryRebound(to: CChar.self) { passChars in
                    EVP_PBE_scrypt(
                        passChars.baseAddress, pass.count, saltBuffer.baseAddress, saltBuffer.count,
                        UInt64(1) << UInt64(parameters.logN), UInt64(parameters.r), UInt64(parameters.p),
                        parameters.memoryBytes + 1024 * 1024, &output, length)
                }
            }
        }
        guard ok == 1 else { throw CryptoError.openSSL("scrypt") }
        return output
    }

    /// Hashes `password` with a fresh random salt and returns the encoded hash.
    public static func hash(_ password: String, parameters: ScryptParameters = .standard) throws -> String {
        let salt = SecureRandom.bytes(saltLength)
        let derived = try scrypt(password: Array(password.utf8), salt: salt, parameters: parameters, length: hashLength)
        return "$scrypt$v=1$ln=\(parameters.logN),r=\(parameters.r),p=\(parameters.p)$"
            + "\(Base64URL.encode(salt))$\(Base64URL.encode(derived))"
    }

    /// Whether `password` matches `encoded`. Malformed encodings never match. The comparison is constant-time.
    public static func verify(_ password: String, against encoded: String) -> Bool {
        guard let decoded = decode(encoded),
            let derived = try? scrypt(
                password: Array(password.utf8), salt: decoded.salt, parameters: decoded.parameters,
                length: decoded.hash.count)
        else { return false }
        return ConstantTime.equals(derived, decoded.hash)
    }

    /// The parts of an encoded hash, or `nil` when it is not a version-1 scrypt encoding.
    public static func decode(_ encoded: String) -> (parameters: ScryptParameters, salt: [UInt8], hash: [UInt8])? {
        let parts = encoded.split(separator: "$", omittingEmptySubsequences: false)
        guard parts.count == 6, parts[0].isEmpty, parts[1] == "scrypt", parts[2] == "v=1" else { return nil }
        var values: [String: Int] = [:]
        for item in parts[3].split(separator: ",") {
            let pair = item.split(separator: "=")
            guard pair.count == 2, let value = Int(pair[1]) else { return nil }
            values[String(pair[0])] = value
        }
        guard let logN = values["ln"], let r = values["r"], let p = values["p"],
            let salt = Base64URL.decode(parts[4]), let hash = Base64URL.decode(parts[5]), hash.count >= 16
        else { return nil }
        return (ScryptParameters(logN: logN, r: r, p: p), salt, hash)
    }
}
