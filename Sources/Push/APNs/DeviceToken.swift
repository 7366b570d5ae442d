import Push

/// An APNs device token: hexadecimal, stored lowercase (32 bytes, 64 characters, today).
public struct DeviceToken: Sendable, Hashable, CustomStringConvertible {
    /// The lowercase hex token, as used in the request path `/3/device/<token>`.
    public let hex: String

    /// Validates `hex`: an even number of 16 to 200 hex characters (either case; stored lowercase).
    public init(_ hex: String) throws(APNsValidationError) {
        guard SignalCharset.matches(hex.utf8, lengths: 16...200, SignalCharset.isHexByte), hex.utf8.count % 2 == 0
        else {
            throw .invalidDeviceToken
        }
        self.hex = hex.lowercased()
    }

    /// A shortened form for logs: the first 8 characters and an ellipsis.
    public var description: String { String(hex.prefix(8)) + "…" }
}
