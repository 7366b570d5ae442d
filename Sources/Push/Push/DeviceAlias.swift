/// The opaque device alias a signal carries (`acct`), on every push service.
///
/// Chosen at random when a device registers; it is never an account id, user name or address. Only 1 to 64
/// characters of `[A-Za-z0-9_-]` (base64url, which includes hex) are accepted, so free text cannot pass.
public struct DeviceAlias: Sendable, Hashable, CustomStringConvertible {
    /// The alias as sent in the payload.
    public let rawValue: String

    /// Validates `rawValue`; throws ``SignalFieldError/invalidAlias`` when it is not a short opaque token.
    public init(_ rawValue: String) throws(SignalFieldError) {
        guard SignalCharset.matches(rawValue.utf8, lengths: 1...64, SignalCharset.isBase64URLByte) else {
            throw .invalidAlias
        }
        self.rawValue = rawValue
    }

    /// The alias itself (it is opaque, not personal data).
    public var description: String { rawValue }
}
