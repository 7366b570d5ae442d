import Foundation

extension SecureRandom {
    /// A random (version 4) UUID from OpenSSL's DRBG; Foundation's `UUID()` opens the system's random device on
    /// every call on Linux.
    public static func uuid() -> UUID {
        SecureRandom.bytes(16).withUnsafeBufferPointer { UUID(randomBytes: $0) }
    }
}

extension UUID {
    /// A version 4 UUID made from 16 random bytes: the version and variant bits are set, the other 122 bits are
    /// the bytes'.
    public init(randomBytes bytes: UnsafeBufferPointer<UInt8>) {
        precondition(bytes.count == 16, "a UUID is made from 16 bytes")
        self.init(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5],
                (bytes[6] & 0x0F) | 0x40,  // version 4
                bytes[7],
                (bytes[8] & 0x3F) | 0x80,  // RFC 4122 variant
                bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }

    /// The canonical text form in lowercase (`8-4-4-4-12` hex digits), as APNs writes `apns-id`.
    public var lowercasedText: String {
        let digits: StaticString = "0123456789abcdef"
        return withUnsafeBytes(of: uuid) { bytes in
            String(unsafeUninitializedCapacity: 36) { buffer in
                var index = 0
                for (position, byte) in bytes.enumerated() {
                    if position == 4 || position == 6 || position == 8 || position == 10 {
                        buffer[index] = UInt8(ascii: "-")
                        index += 1
                    }
                    buffer[index] = digits.utf8Start[Int(byte >> 4)]
                    buffer[index + 1] = digits.utf8Start[Int(byte & 0x0F)]
                    index += 2
                }
                return index
            }
        }
    }
}
