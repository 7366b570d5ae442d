import Push

/// The `apns-collapse-id` header: notifications with the same id replace each other on the device.
public struct CollapseID: Sendable, Hashable, CustomStringConvertible {
    /// The id as sent.
    public let rawValue: String

    /// Validates `rawValue`: 1 to 64 bytes of `[A-Za-z0-9_-]` (Apple's limit is 64 bytes; the character set,
    /// the same as a device alias, keeps free text out of the header).
    public init(_ rawValue: String) throws(APNsValidationError) {
        guard SignalCharset.matches(rawValue.utf8, lengths: 1...64, SignalCharset.isBase64URLByte) else {
            throw .invalidCollapseID
        }
        self.rawValue = rawValue
    }

    /// The id.
    public var description: String { rawValue }
}
