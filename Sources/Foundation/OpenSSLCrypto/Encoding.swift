import Foundation

/// Unpadded base64url (RFC 4648 §5), as JWTs use.
public enum Base64URL {
    /// Encodes `bytes` without padding.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Decodes base64url with or without padding; `nil` when it is not valid base64url.
    public static func decode(_ string: some StringProtocol) -> [UInt8]? {
        guard string.utf8.allSatisfy({ isAlphabet($0) }) else { return nil }
        var text = string.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        let remainder = text.count % 4
        if remainder == 1 { return nil }
        if remainder > 0 { text += String(repeating: "=", count: 4 - remainder) }
        return Data(base64Encoded: text).map { [UInt8]($0) }
    }

    private static func isAlphabet(_ c: UInt8) -> Bool {
        (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c == 0x2d || c == 0x5f
            || c == 0x3d
    }
}

/// Lowercase hexadecimal.
public enum Hex {
    /// Encodes `bytes` as lowercase hex.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        append(bytes, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `bytes` as lowercase hex to `out` (a JSON or text being written). Inlinable, so a caller's module
    /// makes it for its own collection type: the generic form, called across modules, cost a trace exporter most of
    /// its writing.
    @inlinable
    public static func append(_ bytes: some Collection<UInt8>, to out: inout [UInt8]) {
        for byte in bytes {
            out.append(digit(byte >> 4))
            out.append(digit(byte & 0x0f))
        }
    }

    /// Appends the 16 lowercase hex digits of `value`, most significant first: its big-endian bytes as ``append(_:to:)``
    /// writes them, without the bytes made.
    @inlinable
    public static func append(_ value: UInt64, to out: inout [UInt8]) {
        var shift = 60
        while shift >= 0 {
            out.append(digit(UInt8(truncatingIfNeeded: value >> UInt64(shift)) & 0x0f))
            shift -= 4
        }
    }

    /// The lowercase hex digit of `value` (0 to 15).
    @inlinable
    static func digit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") - 10 + value
    }

    /// Decodes hex (either case); `nil` when the text is not an even number of hex digits.
    public static func decode(_ string: some StringProtocol) -> [UInt8]? {
        let chars = Array(string.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(chars.count / 2)
        var index = 0
        while index < chars.count {
            guard let high = value(chars[index]), let low = value(chars[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    private static func value(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x61...0x66: return c - 0x61 + 10
        case 0x41...0x46: return c - 0x41 + 10
        default: return nil
        }
    }
}
