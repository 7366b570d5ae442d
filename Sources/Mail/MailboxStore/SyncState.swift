/// An account's synchronization state as a string: `"<store epoch>-<modseq>"`.
///
/// The epoch is random per store, so a state from another store (or from before a restore) is recognized as
/// foreign rather than silently misread. Clients treat the string as opaque.
public struct SyncState: Sendable, Hashable, CustomStringConvertible, Codable {
    /// The store's epoch: 16 lowercase hex characters.
    public let epoch: String
    /// The account modseq.
    public let modseq: Int64

    /// Creates a state.
    public init(epoch: String, modseq: Int64) {
        self.epoch = epoch
        self.modseq = modseq
    }

    /// Parses a state string; `nil` when it is malformed. Only the spelling ``description`` writes is accepted
    /// (no leading zeros in the modseq), so each state has exactly one string.
    public init?(parsing text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].utf8.count == 16,
            parts[0].utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }),
            parts[1].utf8.count <= 19, parts[1].utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), !parts[1].isEmpty,
            parts[1] == "0" || parts[1].first != "0", let modseq = Int64(parts[1])
        else { return nil }
        self.epoch = String(parts[0])
        self.modseq = modseq
    }

    /// The state string.
    public var description: String { "\(epoch)-\(modseq)" }

    /// Encodes as the state string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    /// Decodes from a state string.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let state = SyncState(parsing: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "malformed state string")
        }
        self = state
    }
}
