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
