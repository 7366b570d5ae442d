/// The role of a mailbox; each account has exactly one mailbox of each role, made with the account and never
/// renamed or destroyed. Its other mailboxes are the user's own (IMAP CREATE, JMAP Mailbox/set).
public enum MailboxRole: String, Sendable, Codable, CaseIterable {
    /// Where deliveries land.
    case inbox
    /// Kept, out of the inbox.
    case archive
    /// Deleted by the user but not yet destroyed.
    case trash
}

/// A mailbox's identifier, the same on every door (`/v1`'s `mailbox`, JMAP's `mailboxIds`, the store's `public_id`)
/// and at both ends (the store writes it, a client reads it): the role's name for the three role mailboxes (`inbox`,
/// `archive`, `trash`), an opaque id for the user's own. Encoded as its string; an id a newer server sends is kept as
/// it is.
public struct MailboxID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The id as every door spells it.
    public var rawValue: String

    /// The mailbox with this id.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The mailbox of `role`.
    public init(_ role: MailboxRole) { rawValue = role.rawValue }

    /// The inbox: incoming mail.
    public static let inbox = MailboxID(.inbox)
    /// The archive: kept mail.
    public static let archive = MailboxID(.archive)
    /// The trash: deleted mail, until it is destroyed.
    public static let trash = MailboxID(.trash)

    /// The role, when this is a role mailbox.
    public var role: MailboxRole? { MailboxRole(rawValue: rawValue) }

    /// The id.
    public var description: String { rawValue }

    /// Decodes the id from its string.
    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    /// Encodes the id as its string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
