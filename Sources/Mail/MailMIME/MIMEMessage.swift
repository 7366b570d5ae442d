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
    public var from: [MailAddress] = []
    /// The To header's mailboxes (groups flattened).
    public var to: [MailAddress] = []
    /// The Cc header's mailboxes.
    public var cc: [MailAddress] = []
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
    public var attachments: [MailAttachment] = []
    /// Whether the whole structure was read (false: unparseable headers, or a limit reached).
    public var isComplete = true

    /// An empty message.
    public init() {}
}
