/// A mailbox in an address header: the display name (decoded, possibly empty) and the address.
public struct MIMEAddress: Sendable, Equatable, Hashable {
    /// The display name, RFC 2047 decoded; empty when the header gives none.
    public var name: String
    /// The address, `local@domain`.
    public var address: String

    /// Creates an address.
    public init(name: String, address: String) {
        self.name = name
        self.address = address
    }

    /// `Name <address>`, or the bare address when there is no name.
    public var displayForm: String { name.isEmpty ? address : "\(name) <\(address)>" }
}

/// A part of a message that is not its text or HTML body.
public struct MIMEAttachment: Sendable, Equatable {
    /// The part's position in the MIME tree, IMAP style: `1`, `2.1`, … (`GET /v1/messages/{id}/parts/{partId}`).
    public var partID: String
    /// The file name (RFC 2231 / RFC 2047 decoded), when the part gives one.
    public var filename: String?
    /// The media type, lowercased: `image/png`.
    public var contentType: String
    /// The size of the decoded content, in bytes.
    public var size: Int

    /// Creates an attachment description.
    public init(partID: String, filename: String?, contentType: String, size: Int) {
        self.partID = partID
        self.filename = filename
        self.contentType = contentType
        self.size = size
    }
}

/// The decoded content of one part.
public struct MIMEPartContent: Sendable, Equatable {
    /// The media type, lowercased.
    public var contentType: String
    /// The file name, when the part gives one.
    public var filename: String?
    /// The content with its transfer encoding (base64, quoted-printable) undone.
    public var bytes: [UInt8]
    /// The `charset` parameter, as the part gives it (text keeps its own charset).
    public var charset: String?
}

/// How far the parser goes into a message's structure.
public struct MIMELimits: Sendable, Equatable {
    /// The most parts (leaves and containers) examined; the rest of the message stays in the raw form only.
    public var maxParts: Int
    /// The deepest nesting of multiparts examined.
    public var maxDepth: Int

    /// Creates limits.
    public init(maxParts: Int = 500, maxDepth: Int = 16) {
        self.maxParts = maxParts
        self.maxDepth = maxDepth
    }
}

/// What a message says about itself: headers decoded, bodies in UTF-8, attachments described.
///
/// Parsing never fails: a message the parser cannot read (or reads only in part, past a limit) gives what could be
/// read, with ``isComplete`` false; the raw bytes are kept by the caller either way.
public struct MIMEMessage: Sendable, Equatable {
    /// The subject, RFC 2047 decoded.
    public var subject = ""
    /// The From header's mailboxes.
    public var from: [MIMEAddress] = []
    /// The To header's mailboxes (groups flattened).
    public var to: [MIMEAddress] = []
    /// The Cc header's mailboxes.
    public var cc: [MIMEAddress] = []
    /// The Date header, seconds since 1970.
    public var sentAt: Double?
    /// The Message-ID, without angle brackets.
    public var messageID: String?
    /// The first message id of In-Reply-To, without angle brackets.
    public var inReplyTo: String?
    /// The text body in UTF-8: the text/plain part, or else the HTML body reduced to text.
    public var text = ""
    /// The HTML body in UTF-8, when there is one.
    public var html: String?
    /// Every other part.
    public var attachments: [MIMEAttachment] = []
    /// Whether the whole structure was read (false: unparseable headers, or a limit reached).
    public var isComplete = true

    /// An empty message.
    public init() {}
}
