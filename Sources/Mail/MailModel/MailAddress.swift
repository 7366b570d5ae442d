/// A mailbox of an address header (To, Cc): display name (possibly empty) and address. The store keeps it and the
/// API sends it as `{"name","address"}`; a client reads it back as the same value.
public struct MailAddress: Sendable, Hashable, Codable {
    /// The display name, RFC 2047 decoded; empty when the header gives none.
    public var name: String
    /// The address, `local@domain`.
    public var address: String

    /// Creates an address.
    public init(name: String = "", address: String) {
        self.name = name
        self.address = address
    }

    /// `Name <address>`, or the bare address when there is no name.
    public var displayForm: String { name.isEmpty ? address : "\(name) <\(address)>" }

    private enum CodingKeys: String, CodingKey { case name, address }

    /// Decodes `{"name","address"}`; a missing name or address is empty.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decodeIfPresent(String.self, forKey: .name) ?? ""
        address = try container.decodeIfPresent(String.self, forKey: .address) ?? ""
    }
}

/// A part of a message that is not its text or HTML body, fetched on demand from
/// `GET /v1/messages/{id}/parts/{partId}`: the store records it at delivery, the API lists it, a client reads it.
public struct MailAttachment: Sendable, Hashable, Codable {
    /// Its position in the MIME tree, IMAP style: `1`, `2.1`, ….
    public var partId: String
    /// Its file name (RFC 2231 / RFC 2047 decoded), when it has one.
    public var filename: String?
    /// Its media type, lowercased: `image/png`.
    public var type: String
    /// Its decoded size in bytes.
    public var size: Int

    /// Creates an attachment description.
    public init(partId: String, filename: String?, type: String, size: Int) {
        self.partId = partId
        self.filename = filename
        self.type = type
        self.size = size
    }
}
