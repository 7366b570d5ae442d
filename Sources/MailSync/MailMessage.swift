import Foundation

/// A mailbox a message can be in. Unknown names from a newer server are kept as they are.
public struct MailboxName: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The name as the server spells it, e.g. `"inbox"`.
    public let rawValue: String

    /// Creates a mailbox name.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Incoming mail.
    public static let inbox = MailboxName(rawValue: "inbox")
    /// Archived mail.
    public static let archive = MailboxName(rawValue: "archive")
    /// Deleted mail, until it is destroyed.
    public static let trash = MailboxName(rawValue: "trash")

    /// The raw name.
    public var description: String { rawValue }

    /// Decodes from a JSON string.
    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    /// Encodes as a JSON string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// One message as the mailbox API describes it.
///
/// `body` is present when the server sent it inline (listings and changes carry bodies up to
/// ``MailMessage/inlineBodyLimit`` bytes) or once it was fetched on demand; `nil` otherwise.
public struct MailMessage: Sendable, Equatable, Codable {
    /// The largest body size, in bytes, that listings and changes carry inline.
    public static let inlineBodyLimit = 16_384

    /// The server's opaque identifier.
    public var id: String
    /// The mailbox the message is in.
    public var mailbox: MailboxName
    /// The sender address.
    public var from: String
    /// The recipient address.
    public var to: String
    /// The subject line.
    public var subject: String
    /// The start of the body, for message lists.
    public var preview: String
    /// The body size in bytes.
    public var size: Int
    /// When the server received the message, in seconds since 1970.
    public var receivedAt: Double
    /// Whether the message has been read.
    public var seen: Bool
    /// Whether the message is flagged.
    public var flagged: Bool
    /// The body, when known locally.
    public var body: String?

    /// Creates a message value.
    public init(
        id: String, mailbox: MailboxName = .inbox, from: String, to: String, subject: String, preview: String = "",
        size: Int, receivedAt: Double, seen: Bool = false, flagged: Bool = false, body: String? = nil
    ) {
        self.id = id
        self.mailbox = mailbox
        self.from = from
        self.to = to
        self.subject = subject
        self.preview = preview
        self.size = size
        self.receivedAt = receivedAt
        self.seen = seen
        self.flagged = flagged
        self.body = body
    }

    /// Whether the body must be fetched with ``MailTransport/fetchMessage(id:)`` before it can be shown.
    public var needsBodyFetch: Bool { body == nil }

    /// This message, with the body of `previous` when this one carries none (bodies never change).
    public func keepingBody(of previous: MailMessage?) -> MailMessage {
        guard body == nil, let previousBody = previous?.body else { return self }
        var merged = self
        merged.body = previousBody
        return merged
    }

    private enum CodingKeys: String, CodingKey {
        case id, mailbox, from, to, subject, preview, size, receivedAt, seen, flagged, body
    }

    /// Decodes a message; `receivedAt` may be a number of seconds or an ISO 8601 string.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        mailbox = try container.decodeIfPresent(MailboxName.self, forKey: .mailbox) ?? .inbox
        from = try container.decodeIfPresent(String.self, forKey: .from) ?? ""
        to = try container.decodeIfPresent(String.self, forKey: .to) ?? ""
        subject = try container.decodeIfPresent(String.self, forKey: .subject) ?? ""
        preview = try container.decodeIfPresent(String.self, forKey: .preview) ?? ""
        size = try container.decodeIfPresent(Int.self, forKey: .size) ?? 0
        if let seconds = try? container.decode(Double.self, forKey: .receivedAt) {
            receivedAt = seconds
        } else if let text = try? container.decode(String.self, forKey: .receivedAt) {
            receivedAt = Self.parseDate(text) ?? 0
        } else {
            receivedAt = 0
        }
        seen = try container.decodeIfPresent(Bool.self, forKey: .seen) ?? false
        flagged = try container.decodeIfPresent(Bool.self, forKey: .flagged) ?? false
        body = try container.decodeIfPresent(String.self, forKey: .body)
    }

    /// Encodes the message with the API's field names (`body` left out when unknown).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(mailbox, forKey: .mailbox)
        try container.encode(from, forKey: .from)
        try container.encode(to, forKey: .to)
        try container.encode(subject, forKey: .subject)
        try container.encode(preview, forKey: .preview)
        try container.encode(size, forKey: .size)
        try container.encode(receivedAt, forKey: .receivedAt)
        try container.encode(seen, forKey: .seen)
        try container.encode(flagged, forKey: .flagged)
        try container.encodeIfPresent(body, forKey: .body)
    }

    private static func parseDate(_ text: String) -> Double? {
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return date.timeIntervalSince1970 }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)?.timeIntervalSince1970
    }
}

/// The changes to apply to move from one sync state to the next: one page of `GET /v1/changes`.
public struct MessageChanges: Sendable, Equatable, Codable {
    /// The state the page starts from (the `since` the client sent).
    public var oldState: String
    /// The state reached once the page is applied.
    public var newState: String
    /// Whether more changes follow: ask again with `since` = ``newState``.
    public var hasMore: Bool
    /// Messages created since ``oldState``.
    public var created: [MailMessage]
    /// Messages whose flags or mailbox changed since ``oldState``.
    public var updated: [MailMessage]
    /// Identifiers of messages destroyed since ``oldState``.
    public var destroyed: [String]

    /// Creates a page of changes.
    public init(
        oldState: String, newState: String, hasMore: Bool = false, created: [MailMessage] = [],
        updated: [MailMessage] = [], destroyed: [String] = []
    ) {
        self.oldState = oldState
        self.newState = newState
        self.hasMore = hasMore
        self.created = created
        self.updated = updated
        self.destroyed = destroyed
    }
}

/// One page of the full message listing, `GET /v1/messages`.
public struct MessagePage: Sendable, Equatable, Codable {
    /// The messages of this page.
    public var messages: [MailMessage]
    /// The state the listing was read at (use the first page's value for the whole listing).
    public var state: String
    /// The cursor of the next page, or `nil` on the last page.
    public var nextCursor: String?

    /// Creates a page.
    public init(messages: [MailMessage], state: String, nextCursor: String?) {
        self.messages = messages
        self.state = state
        self.nextCursor = nextCursor
    }
}

/// A change to a message's flags or mailbox, `PATCH /v1/messages/{id}`. `nil` fields are left as they are.
public struct MessageUpdate: Sendable, Equatable, Codable {
    /// The new read flag.
    public var seen: Bool?
    /// The new flagged flag.
    public var flagged: Bool?
    /// The mailbox to move the message to.
    public var mailbox: MailboxName?

    /// Creates an update.
    public init(seen: Bool? = nil, flagged: Bool? = nil, mailbox: MailboxName? = nil) {
        self.seen = seen
        self.flagged = flagged
        self.mailbox = mailbox
    }
}

/// How many messages a sync step created, updated and destroyed in the local cache.
public struct ChangeCounts: Sendable, Equatable {
    /// Messages added.
    public var created: Int
    /// Messages changed.
    public var updated: Int
    /// Messages removed.
    public var destroyed: Int

    /// Creates counts.
    public init(created: Int = 0, updated: Int = 0, destroyed: Int = 0) {
        self.created = created
        self.updated = updated
        self.destroyed = destroyed
    }

    /// Whether anything changed.
    public var isEmpty: Bool { created == 0 && updated == 0 && destroyed == 0 }
}
