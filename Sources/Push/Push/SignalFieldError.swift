/// Why a field of a content-free signal was refused.
public enum SignalFieldError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The alias is not 1–64 characters of `[A-Za-z0-9_-]`.
    case invalidAlias
    /// The state tag is not 16 characters of `[A-Za-z0-9_-]`.
    case invalidStateTag
    /// The badge is negative.
    case negativeBadge

    /// What is wrong, without the value.
    public var description: String {
        switch self {
        case .invalidAlias: "the device alias must be 1-64 characters of [A-Za-z0-9_-]"
        case .invalidStateTag: "the state tag must be 16 characters of [A-Za-z0-9_-]"
        case .negativeBadge: "the badge must not be negative"
        }
    }
}

/// The character sets of the signal's fields and of the services' addresses, shared by the validated types and
/// the payload guards of every service.
package enum SignalCharset {
    /// `[A-Za-z0-9_-]`: base64url, which includes lowercase and uppercase hex.
    package static func isBase64URLByte(_ byte: UInt8) -> Bool {
        isAlphanumeric(byte) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
    }

    /// `[0-9a-fA-F]`.
    package static func isHexByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F"))
    }

    /// `[A-Za-z0-9]`.
    package static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
    }

    /// Whether `bytes` has a length in `lengths` and every byte passes `allowed`.
    package static func matches(
        _ bytes: some Collection<UInt8>, lengths: ClosedRange<Int>, _ allowed: (UInt8) -> Bool
    ) -> Bool {
        lengths.contains(bytes.count) && bytes.allSatisfy(allowed)
    }
}
