/// The tag of an account's sync state under one device's ``SignalKey``: what a signal carries as `st`.
///
/// A state string counts changes (`<epoch>-<modseq>`); its tag does not. Without the device's key nobody can
/// tell from two tags how far apart their states are, or compute the tag of a state, so a push service learns
/// only that something changed. Exactly 16 characters of `[A-Za-z0-9_-]`.
public struct StateTag: Sendable, Hashable, CustomStringConvertible {
    /// The number of characters of a tag.
    public static let length = 16

    /// The tag as sent in the payload.
    public let rawValue: String

    /// Validates `rawValue`; throws ``SignalFieldError/invalidStateTag`` unless it is 16 base64url characters.
    public init(_ rawValue: String) throws(SignalFieldError) {
        guard SignalCharset.matches(rawValue.utf8, lengths: Self.length...Self.length, SignalCharset.isBase64URLByte)
        else { throw .invalidStateTag }
        self.rawValue = rawValue
    }

    /// The tag itself.
    public var description: String { rawValue }
}
