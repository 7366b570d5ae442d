/// Why a signal or notification value could not be built.
///
/// Cases name the field and the rule that failed; they never carry the rejected value, so the error can be
/// logged without leaking what a caller tried to put into a push.
public enum APNsValidationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A signal must carry a badge, `content-available`, or both.
    case emptySignal
    /// The badge is negative.
    case negativeBadge
    /// The device alias (`acct`) is empty, longer than 64 characters, or has a character outside `[A-Za-z0-9_-]`.
    case invalidAlias
    /// The state tag (`st`) is not 16 characters of `[A-Za-z0-9_-]`.
    case invalidState
    /// The device token is not 16 to 200 hexadecimal characters (an even number).
    case invalidDeviceToken
    /// The topic (bundle id) is empty, longer than 255 characters, or has a character outside `[A-Za-z0-9._-]`.
    case invalidTopic
    /// The collapse id is empty, longer than 64 bytes, or has a character outside `[A-Za-z0-9_-]`.
    case invalidCollapseID
    /// A background (content-available only) signal must use priority 5.
    case backgroundRequiresPriority5
    /// The expiration is before 1970.
    case invalidExpiration

    /// A one-line explanation that never includes the rejected value.
    public var description: String {
        switch self {
        case .emptySignal: "a signal needs a badge or content-available"
        case .negativeBadge: "the badge must not be negative"
        case .invalidAlias: "the device alias must be 1-64 characters of [A-Za-z0-9_-]"
        case .invalidState: "the state tag must be 16 characters of [A-Za-z0-9_-]"
        case .invalidDeviceToken: "the device token must be 16-200 hexadecimal characters"
        case .invalidTopic: "the topic must be 1-255 characters of [A-Za-z0-9._-]"
        case .invalidCollapseID: "the collapse id must be 1-64 characters of [A-Za-z0-9_-]"
        case .backgroundRequiresPriority5: "a background signal must use priority 5"
        case .invalidExpiration: "the expiration must not be negative"
        }
    }
}

/// Character-class checks shared by the validated value types and the payload guard.
enum Charset {
    /// `[A-Za-z0-9_-]`: base64url, which includes lowercase and uppercase hex.
    static func isAliasByte(_ byte: UInt8) -> Bool {
        isAlphanumeric(byte) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
    }

    /// `[0-9a-fA-F]`.
    static func isHexByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F"))
    }

    /// `[A-Za-z0-9]`.
    static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
    }

    /// Whether `bytes` has a length in `lengths` and every byte passes `allowed`.
    static func matches(
        _ bytes: some Collection<UInt8>, lengths: ClosedRange<Int>, _ allowed: (UInt8) -> Bool
    ) -> Bool {
        lengths.contains(bytes.count) && bytes.allSatisfy(allowed)
    }
}
