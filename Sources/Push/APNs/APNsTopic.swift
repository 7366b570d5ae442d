import Push

/// The `apns-topic` header: the app's bundle id.
public struct APNsTopic: Sendable, Hashable, CustomStringConvertible {
    /// The bundle id, e.g. `com.example.mail`.
    public let rawValue: String

    /// Validates `rawValue`: 1 to 255 characters of `[A-Za-z0-9._-]`.
    public init(_ rawValue: String) throws(APNsValidationError) {
        let allowed: (UInt8) -> Bool = {
            SignalCharset.isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-")
                || $0 == UInt8(ascii: "_")
        }
        guard SignalCharset.matches(rawValue.utf8, lengths: 1...255, allowed) else { throw .invalidTopic }
        self.rawValue = rawValue
    }

    /// The bundle id.
    public var description: String { rawValue }
}
