/// Why the payload guard refused a serialized payload.
///
/// Names the place and the rule, never a value; an unexpected key is reported by where it was found, not by
/// its name, because a key name could itself carry text.
public struct PayloadGuardViolation: Error, Sendable, Hashable, CustomStringConvertible {
    /// The rule that failed.
    public enum Kind: Sendable, Hashable {
        /// The bytes are not a single valid JSON value.
        case notJSON
        /// The top-level value is not a JSON object.
        case notAnObject
        /// The payload is larger than the limit.
        case tooLarge(size: Int, limit: Int)
        /// A key outside the allowed set appeared in the object at ``PayloadGuardViolation/location``.
        case unexpectedKey
        /// A key appeared twice in the object at ``PayloadGuardViolation/location``.
        case duplicateKey
        /// `aps` is missing.
        case missingAps
        /// `aps` holds neither `badge` nor `content-available`.
        case emptyAps
        /// The value at ``PayloadGuardViolation/location`` has the wrong JSON type.
        case wrongType
        /// The value at ``PayloadGuardViolation/location`` has the right type but a value the rules forbid.
        case invalidValue
    }

    /// The rule that failed.
    public let kind: Kind
    /// Where: `$` (the top level), `$.aps`, `$.aps.badge`, `$.aps.content-available`, `$.acct` or `$.st`.
    public let location: String

    /// Creates a violation.
    public init(_ kind: Kind, at location: String = "$") {
        self.kind = kind
        self.location = location
    }

    /// A one-line explanation that is safe to log.
    public var description: String {
        switch kind {
        case .notJSON: "payload is not valid JSON"
        case .notAnObject: "payload is not a JSON object"
        case .tooLarge(let size, let limit): "payload is \(size) bytes, more than \(limit)"
        case .unexpectedKey: "unexpected key in \(location)"
        case .duplicateKey: "duplicate key in \(location)"
        case .missingAps: "payload has no aps"
        case .emptyAps: "aps has neither badge nor content-available"
        case .wrongType: "\(location) has the wrong type"
        case .invalidValue: "\(location) has a forbidden value"
        }
    }
}
