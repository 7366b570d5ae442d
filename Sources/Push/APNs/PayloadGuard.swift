import Push

/// The last check before a payload goes on the wire: it inspects the serialized bytes, not the value they
/// came from.
///
/// A payload passes only when it is a JSON object whose keys are a subset of `aps`, `acct` and `st`; `aps`
/// holds only `badge` (a non-negative integer) and/or `content-available` (exactly `1`); `acct` matches
/// `[A-Za-z0-9_-]{1,64}` and `st` matches `[A-Za-z0-9_-]{16}` (a state tag); no key repeats; and the size is
/// within the limit.
public struct PayloadGuard: Sendable, Hashable {
    /// The size limit to enforce.
    public enum Limit: Sendable, Hashable {
        /// 4096 bytes, APNs' limit for every push type.
        case standard
        /// 2048 bytes, the legacy binary-provider limit, for deployments that want the stricter bound.
        case legacy

        /// The limit in bytes.
        public var bytes: Int { self == .standard ? 4096 : 2048 }
    }

    /// The size limit enforced.
    public var limit: Limit

    /// Creates a guard with the given size limit.
    public init(limit: Limit = .standard) {
        self.limit = limit
    }

    /// Checks `payload`; throws the first ``PayloadGuardViolation`` found.
    public func inspect(_ payload: some Collection<UInt8>) throws(PayloadGuardViolation) {
        let bytes = Array(payload)
        guard bytes.count <= limit.bytes else {
            throw PayloadGuardViolation(.tooLarge(size: bytes.count, limit: limit.bytes))
        }
        let root: StrictJSON.Value
        do {
            root = try StrictJSON.parse(bytes)
        } catch {
            throw PayloadGuardViolation(.notJSON)
        }
        guard case .object(let members) = root else { throw PayloadGuardViolation(.notAnObject) }
        try Self.checkUnique(members, at: "$")
        var sawAps = false
        for (key, value) in members {
            switch key {
            case "aps":
                sawAps = true
                try Self.checkAps(value)
            case "acct":
                try Self.checkString(value, at: "$.acct", lengths: 1...64, SignalCharset.isBase64URLByte)
            case "st":
                try Self.checkString(
                    value, at: "$.st", lengths: StateTag.length...StateTag.length, SignalCharset.isBase64URLByte)
            default:
                throw PayloadGuardViolation(.unexpectedKey, at: "$")
            }
        }
        guard sawAps else { throw PayloadGuardViolation(.missingAps) }
    }

    /// Whether `payload` passes ``inspect(_:)``.
    public func allows(_ payload: some Collection<UInt8>) -> Bool {
        do {
            try inspect(payload)
            return true
        } catch {
            return false
        }
    }

    private static func checkUnique(
        _ members: [(key: String, value: StrictJSON.Value)], at location: String
    ) throws(PayloadGuardViolation) {
        var seen = Set<String>()
        for member in members where !seen.insert(member.key).inserted {
            throw PayloadGuardViolation(.duplicateKey, at: location)
        }
    }

    private static func checkAps(_ value: StrictJSON.Value) throws(PayloadGuardViolation) {
        guard case .object(let members) = value else { throw PayloadGuardViolation(.wrongType, at: "$.aps") }
        try checkUnique(members, at: "$.aps")
        guard !members.isEmpty else { throw PayloadGuardViolation(.emptyAps, at: "$.aps") }
        for (key, value) in members {
            switch key {
            case "badge":
                guard case .number(let text) = value else {
                    throw PayloadGuardViolation(.wrongType, at: "$.aps.badge")
                }
                // A non-negative integer: digits only (no sign, fraction or exponent) that fit in an Int.
                guard text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                    Int(text) != nil
                else { throw PayloadGuardViolation(.invalidValue, at: "$.aps.badge") }
            case "content-available":
                guard case .number(let text) = value else {
                    throw PayloadGuardViolation(.wrongType, at: "$.aps.content-available")
                }
                guard text == "1" else { throw PayloadGuardViolation(.invalidValue, at: "$.aps.content-available") }
            default:
                throw PayloadGuardViolation(.unexpectedKey, at: "$.aps")
            }
        }
    }

    private static func checkString(
        _ value: StrictJSON.Value, at location: String, lengths: ClosedRange<Int>, _ allowed: (UInt8) -> Bool
    ) throws(PayloadGuardViolation) {
        guard case .string(let text) = value else { throw PayloadGuardViolation(.wrongType, at: location) }
        guard SignalCharset.matches(text.utf8, lengths: lengths, allowed) else {
            throw PayloadGuardViolation(.invalidValue, at: location)
        }
    }
}
