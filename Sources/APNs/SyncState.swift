/// The account's sync state string sent as the `st` key of a signal.
///
/// Opaque to the client, which compares it with its own state to decide whether to sync. Only 1 to 64
/// characters of `[0-9a-f-]` are accepted.
public struct SyncState: Sendable, Hashable, CustomStringConvertible {
    /// The state as sent in the payload.
    public let rawValue: String

    /// Validates `rawValue`; throws ``APNsValidationError/invalidState`` when it does not match `[0-9a-f-]{1,64}`.
    public init(_ rawValue: String) throws(APNsValidationError) {
        guard Charset.matches(rawValue.utf8, lengths: 1...64, Charset.isStateByte) else {
            throw .invalidState
        }
        self.rawValue = rawValue
    }

    /// The state itself.
    public var description: String { rawValue }
}
