import Foundation

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
    public var mailbox: MailboxID
    /// The sender address.
    public var from: String
    /// The To header's mailboxes.
    public var to: [MailAddress]
    /// The Cc header's mailboxes.
    public var cc: [MailAddress]
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
    /// The Message-ID header, without angle brackets.
    public var messageId: String?
    /// The first id of In-Reply-To.
    public var inReplyTo: String?
    /// The Date header, seconds since 1970.
    public var sentAt: Double?
    /// Whether the message has attachments.
    public var hasAttachment: Bool
    /// Its attachments.
    public var attachments: [MailAttachment]
    /// The HTML body, when fetched (`GET /v1/messages/{id}` carries it; listings and changes do not).
    public var htmlBody: String?

    /// Creates a message value.
    public init(
        id: String, mailbox: MailboxID = .inbox, from: String, to: [MailAddress], cc: [MailAddress] = [],
        subject: String, preview: String = "", size: Int, receivedAt: Double, seen: Bool = false,
        flagged: Bool = false, body: String? = nil, messageId: String? = nil, inReplyTo: String? = nil,
        sentAt: Double? = nil, attachments: [MailAttachment] = [], htmlBody: String? = nil
    ) {
        self.id = id
        self.mailbox = mailbox
        self.from = from
        self.to = to
        self.cc = cc
        self.messageId = messageId
        self.inReplyTo = inReplyTo
        self.sentAt = sentAt
        self.hasAttachment = !attachments.isEmpty
        self.attachments = attachments
        self.htmlBody = htmlBody
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

    /// This message, with the bodies of `previous` when this one carries none (bodies never change).
    public func keepingBody(of previous: MailMessage?) -> MailMessage {
        guard let previous else { return self }
        var merged = self
        if merged.body == nil { merged.body = previous.body }
        if merged.htmlBody == nil { merged.htmlBody = previous.htmlBody }
        return merged
    }

    private enum CodingKeys: String, CodingKey {
        case id, mailbox, from, to, cc, subject, preview, size, receivedAt, seen, flagged, body, messageId, inReplyTo
        case sentAt, hasAttachment, attachments, htmlBody
    }

    /// Decodes a message; `receivedAt` may be a number of seconds or an ISO 8601 string.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        mailbox = try container.decodeIfPresent(MailboxID.self, forKey: .mailbox) ?? .inbox
        from = try container.decodeIfPresent(String.self, forKey: .from) ?? ""
        // An array of mailboxes; a server from before MIME support sent the recipient as one string.
        if let addresses = try? container.decodeIfPresent([MailAddress].self, forKey: .to) {
            to = addresses
        } else {
            to = try container.decodeIfPresent(String.self, forKey: .to).map { [MailAddress(address: $0)] } ?? []
        }
        cc = try container.decodeIfPresent([MailAddress].self, forKey: .cc) ?? []
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
        messageId = try container.decodeIfPresent(String.self, forKey: .messageId)
        inReplyTo = try container.decodeIfPresent(String.self, forKey: .inReplyTo)
        sentAt = try container.decodeIfPresent(Double.self, forKey: .sentAt)
        attachments = try container.decodeIfPresent([MailAttachment].self, forKey: .attachments) ?? []
        hasAttachment = try container.decodeIfPresent(Bool.self, forKey: .hasAttachment) ?? !attachments.isEmpty
        htmlBody = try container.decodeIfPresent(String.self, forKey: .htmlBody)
    }

    /// Encodes the message with the API's field names (`body` left out when unknown).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(mailbox, forKey: .mailbox)
        try container.encode(from, forKey: .from)
        try container.encode(to, forKey: .to)
        try container.encode(cc, forKey: .cc)
        try container.encode(subject, forKey: .subject)
        try container.encode(preview, forKey: .preview)
        try container.encode(size, forKey: .size)
        try container.encode(receivedAt, forKey: .receivedAt)
        try container.encode(seen, forKey: .seen)
        try container.encode(flagged, forKey: .flagged)
        try container.encodeIfPresent(body, forKey: .body)
        try container.encodeIfPresent(messageId, forKey: .messageId)
        try container.encodeIfPresent(inReplyTo, forKey: .inReplyTo)
        try container.encodeIfPresent(sentAt, forKey: .sentAt)
        try container.encode(hasAttachment, forKey: .hasAttachment)
        try container.encode(attachments, forKey: .attachments)
        try container.encodeIfPresent(htmlBody, forKey: .htmlBody)
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
    public var mailbox: MailboxID?

    /// Creates an update.
    public init(seen: Bool? = nil, flagged: Bool? = nil, mailbox: MailboxID? = nil) {
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
