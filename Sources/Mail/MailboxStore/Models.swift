import JSONText
import Push

/// A mailbox with its counts.
public struct MailboxSummary: Sendable, Equatable, Codable {
    /// The mailbox's identifier.
    public var id: MailboxID
    /// Its name: the role's (`Inbox`, `Archive`, `Trash`) or the one its user gave it (IMAP's mailbox name, with
    /// `/` between the levels of a hierarchy).
    public var name: String
    /// Its role; `nil` for the user's own mailboxes.
    public var role: MailboxRole?
    /// The account's modseq when it was made (0 for the role mailboxes, made with the account).
    public var createdModseq: Int64 = 0
    /// Messages in it.
    public var total: Int
    /// Unread messages in it.
    public var unread: Int

    /// The mailbox of `/v1/mailboxes`: `id`, `name`, `role` (null for the user's own), `total`, `unread`.
    enum CodingKeys: String, CodingKey {
        case id, name, role, total, unread
    }

    /// A mailbox as the store read it.
    public init(
        id: MailboxID, name: String, role: MailboxRole?, createdModseq: Int64 = 0, total: Int, unread: Int
    ) {
        self.id = id
        self.name = name
        self.role = role
        self.createdModseq = createdModseq
        self.total = total
        self.unread = unread
    }

    /// Decodes the `/v1/mailboxes` form (without `createdModseq`, which it does not carry).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(MailboxID.self, forKey: .id)
        name = try container.decode(String.self, forKey: .name)
        role = try container.decodeIfPresent(MailboxRole.self, forKey: .role)
        total = try container.decode(Int.self, forKey: .total)
        unread = try container.decode(Int.self, forKey: .unread)
    }

    /// Encodes the `/v1/mailboxes` form.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(name, forKey: .name)
        try container.encode(role, forKey: .role)
        try container.encode(total, forKey: .total)
        try container.encode(unread, forKey: .unread)
    }
}

/// A stored message.
public struct MessageRecord: Sendable, Equatable, Codable {
    /// The public, opaque identifier.
    public var id: String
    /// The mailbox it is in.
    public var mailbox: MailboxID
    /// Sender address.
    public var from: String
    /// Recipient (the account's username).
    public var to: String
    /// Subject line.
    public var subject: String
    /// The first characters of the body.
    public var preview: String
    /// The body.
    public var body: String
    /// The body's size in bytes.
    public var size: Int
    /// When it was delivered, seconds since 1970.
    public var receivedAt: Double
    /// Whether it has been read.
    public var seen: Bool
    /// Whether it is flagged.
    public var flagged: Bool
    /// The account modseq of its last change.
    public var modseq: Int64
    /// The Message-ID header, without angle brackets.
    public var messageID: String? = nil
    /// The first id of In-Reply-To, without angle brackets.
    public var inReplyTo: String? = nil
    /// The To header's mailboxes.
    public var recipients: [MailAddress] = []
    /// The Cc header's mailboxes.
    public var cc: [MailAddress] = []
    /// The Date header, seconds since 1970.
    public var sentAt: Double? = nil
    /// The parts that are not the text or HTML body.
    public var attachments: [MailAttachment] = []
    /// The HTML body; read only for a single message (``MailboxStore/message(id:accountID:)``).
    public var htmlBody: String? = nil
    /// Its other keywords, lowercased and sorted: IMAP's `\Answered` and `\Draft` as JMAP spells them (`$answered`,
    /// `$draft`), and any the user set (`$forwarded`, `$junk`, a tag). `$seen` and `$flagged` are ``seen`` and
    /// ``flagged``.
    public var keywords: [String] = []

    /// Whether it has attachments.
    public var hasAttachment: Bool { !attachments.isEmpty }
}

extension MailAddress: JSONTextRepresentable {
    /// `{"name","address"}`: the form the store keeps in its JSON columns and the API returns.
    public var json: String {
        var object = JSONObjectText()
        object.add("name", name)
        object.add("address", address)
        return object.json
    }
}

extension MailAddress: JSONColumnElement {
    init?(column value: JSONValue) {
        guard let name = value["name"]?.string, let address = value["address"]?.string else { return nil }
        self.init(name: name, address: address)
    }
}

extension MailAttachment: JSONTextRepresentable {
    /// `{"partId","filename","type","size"}` (no `filename` when it has none): the store's and the API's form.
    public var json: String {
        var object = JSONObjectText()
        object.add("partId", partId)
        object.add("filename", filename)
        object.add("type", type)
        object.add("size", size)
        return object.json
    }
}

extension MailAttachment: JSONColumnElement {
    init?(column value: JSONValue) {
        guard let partId = value["partId"]?.string, let type = value["type"]?.string, let size = value["size"]?.int
        else { return nil }
        self.init(partId: partId, filename: value["filename"]?.string, type: type, size: Int(size))
    }
}

/// An element of one of the store's JSON array columns (``MailboxStore``'s `to_json`, `cc_json`,
/// `attachments_json`), read back from the form its ``JSONTextRepresentable`` conformance writes.
protocol JSONColumnElement {
    /// The element `value` holds; `nil` when it is not of this shape.
    init?(column value: JSONValue)
}

/// A new message to store.
public struct NewMessage: Sendable, Equatable {
    /// Recipient username.
    public var to: String
    /// Sender address.
    public var from: String
    /// Subject line.
    public var subject: String
    /// The body.
    public var body: String
    /// The HTML body, when the message has one.
    public var htmlBody: String? = nil
    /// The Message-ID header, without angle brackets.
    public var messageID: String? = nil
    /// The first id of In-Reply-To.
    public var inReplyTo: String? = nil
    /// The To header's mailboxes.
    public var recipients: [MailAddress] = []
    /// The Cc header's mailboxes.
    public var cc: [MailAddress] = []
    /// The Date header, seconds since 1970.
    public var sentAt: Double? = nil
    /// The parts that are not the text or HTML body.
    public var attachments: [MailAttachment] = []
    /// The message exactly as it arrived from an MTA (RFC 5322), kept byte for byte as a content-addressed blob.
    /// A delivery made of fields has none: its RFC 5322 form is composed from them when asked for.
    public var raw: [UInt8]? = nil
    /// Set for mail from an MTA: a second delivery of the same bytes to the same account (a retransmission after
    /// a lost reply) stores nothing and returns the first copy's id.
    public var deduplicates = false
    /// The mailbox it is stored in: the inbox for a delivery; another for a message a mail client files itself
    /// (IMAP APPEND and COPY).
    public var mailbox = MailboxID.inbox
    /// Stored as read.
    public var seen = false
    /// Stored as flagged.
    public var flagged = false
    /// Stored with these other keywords (``MessageRecord/keywords``).
    public var keywords: [String] = []
    /// When it arrived (seconds since 1970); nil: now. A client filing a message may give its own (IMAP's
    /// INTERNALDATE).
    public var receivedAt: Double? = nil

    /// Creates a message.
    public init(to: String, from: String, subject: String, body: String) {
        self.to = to
        self.from = from
        self.subject = subject
        self.body = body
    }
}

/// What one read of some of an account's messages found (``MailboxStore/messages(ids:accountID:sources:)``).
public struct MessageRead: Sendable {
    /// The account's state the messages were read at.
    public var state: SyncState
    /// The messages found, in no order.
    public var records: [MessageRecord]
    /// Where each found message's RFC 5322 form comes from, by id (empty unless asked for).
    public var sources: [String: MessageSource]
}

/// Where a message's RFC 5322 form comes from.
public enum MessageSource: Sendable, Equatable {
    /// The bytes an MTA sent, kept as they arrived.
    case stored([UInt8])
    /// A message delivered as fields: its RFC 5322 form is composed from them when it is asked for.
    case fields(DeliveredFields)
}

/// The fields of a `POST /v1/deliveries` message that its RFC 5322 form is made of.
public struct DeliveredFields: Sendable, Equatable {
    /// The sender, as given.
    public var from: String
    /// The recipient, as given (not lowercased).
    public var to: String
    /// The subject line.
    public var subject: String
    /// The body.
    public var body: String
    /// The Date header, seconds since 1970.
    public var sentAt: Double
    /// The Message-ID header, without angle brackets.
    public var messageID: String

    /// Creates the fields.
    public init(from: String, to: String, subject: String, body: String, sentAt: Double, messageID: String) {
        self.from = from
        self.to = to
        self.subject = subject
        self.body = body
        self.sentAt = sentAt
        self.messageID = messageID
    }
}

/// The result of storing a delivery.
public struct DeliveryReceipt: Sendable, Equatable {
    /// The new message's identifier.
    public var id: String
    /// The account's state right after the delivery.
    public var state: SyncState
    /// The recipient's account id.
    public var accountID: Int64
    /// Whether the account already had this message (``NewMessage/deduplicates``): nothing was stored.
    public var duplicate = false
}

/// An account, without its password hash.
public struct Account: Sendable, Equatable {
    /// The account id (internal; never sent in a signal).
    public var id: Int64
    /// The username (also the mail address the account receives at).
    public var username: String
    /// The current modseq.
    public var modseq: Int64
}

/// An authenticated session.
public struct SessionRecord: Sendable, Equatable {
    /// The session id.
    public var id: Int64
    /// The account it belongs to.
    public var accountID: Int64
    /// The name the client gave for its device.
    public var deviceName: String
    /// When it began (sign-in), seconds since 1970.
    public var createdAt: Double
    /// When it was last used, as last written (see ``MailboxStore/Configuration/sessionIdleTimeout``).
    public var lastUsedAt: Double
}

/// A registered device.
public struct DeviceRecord: Sendable, Equatable {
    /// The internal device id.
    public var id: Int64
    /// The device's id in the API (`POST /v1/devices` answers it, `DELETE /v1/devices/{id}` takes it): random,
    /// opaque. `nil` for a device registered before devices had one (it is deleted by its APNs token).
    public var handle: String?
    /// Where the device is reached: its push service, the service's address for it, its app and environment.
    public var address: PushAddress
    /// A random opaque alias sent in signals instead of any account identifier.
    public var alias: String
    /// The key the device's signals tag states with; `nil` for a device registered before signal keys existed.
    public var signalKey: SignalKey?
    /// The owning account.
    public var accountID: Int64
    /// When it was registered (or last re-registered), seconds since 1970.
    public var registeredAt: Double
}

/// One page of changes since a state: the messages themselves (``Changes``) or their ids (``ChangedIDs``).
public struct ChangePage<Item: Sendable>: Sendable {
    /// The state the changes start from.
    public var oldState: SyncState
    /// The state after applying this page.
    public var newState: SyncState
    /// Whether more changes follow (ask again from `newState`).
    public var hasMore: Bool
    /// Messages created since `oldState` (and still present).
    public var created: [Item]
    /// Messages that existed at `oldState` and changed since.
    public var updated: [Item]
    /// Identifiers of messages destroyed since `oldState`.
    public var destroyed: [String]
}

extension ChangePage: Equatable where Item: Equatable {}

/// One page of changes, the messages whole: what a device's sync fetches.
public typealias Changes = ChangePage<MessageRecord>

/// One page of changes, the messages' ids only: what JMAP's `/changes` methods answer.
public typealias ChangedIDs = ChangePage<String>

/// One page of a full listing.
public struct MessagePage: Sendable, Equatable {
    /// The messages, oldest first.
    public var messages: [MessageRecord]
    /// The account's state when the page was read.
    public var state: SyncState
    /// Where the next page starts, or `nil` when this was the last.
    public var nextCursor: String?
}

/// A device that is due a signal, with everything the dispatcher needs to build it.
public struct OutboxItem: Sendable, Equatable {
    /// The device.
    public var deviceID: Int64
    /// Where it is reached.
    public var address: PushAddress
    /// Its opaque alias.
    public var alias: String
    /// Its signal key, if it has one.
    public var signalKey: SignalKey?
    /// The account's modseq the row holds (the claim).
    public var modseq: Int64
    /// The account's state now.
    public var state: SyncState
    /// The account's unread count now (the badge).
    public var unread: Int
    /// Failed attempts so far (deferrals for a budget or pacing are not failures).
    public var attempts: Int
    /// When the device was registered, seconds since 1970 (a report that it is gone is judged against it).
    public var registeredAt: Double
    /// The device's account.
    public var accountID: Int64
    /// The newest modseq the device was signalled before (a claim more than one past it coalesces changes).
    public var lastSignalledModseq: Int64
}

/// A change the store committed: the account's new modseq, and when (the store's clock, seconds since 1970).
public struct CommittedChange: Sendable, Equatable {
    /// The account id of a change that stands for any account: another instance's changes may have been missed
    /// (the process's LISTEN connection was lost and made again), so whoever waits on an account looks again.
    public static let everyAccount: Int64 = -1

    /// The account, or ``everyAccount``.
    public var accountID: Int64
    /// Its modseq after the change.
    public var modseq: Int64
    /// When the change was written.
    public var at: Double
}

/// One process sharing the store, as it last reported itself (for the console's cluster view).
public struct InstanceReport: Sendable, Equatable {
    /// Its name (``MailboxStore/Configuration/instanceID``).
    public var id: String
    /// When it started, seconds since 1970.
    public var startedAt: Double
    /// When it last reported.
    public var seenAt: Double
    /// Changes it committed since it started.
    public var changes: Int64
    /// Signals its push services accepted since it started.
    public var signalsSent: Int64
    /// Signals refused, retried, dropped or deferred since it started.
    public var signalsFailed: Int64

    /// A report.
    public init(
        id: String, startedAt: Double, seenAt: Double, changes: Int64, signalsSent: Int64, signalsFailed: Int64
    ) {
        self.id = id
        self.startedAt = startedAt
        self.seenAt = seenAt
        self.changes = changes
        self.signalsSent = signalsSent
        self.signalsFailed = signalsFailed
    }
}

/// The outbox of one push service, for the console.
public struct OutboxSummary: Sendable, Equatable {
    /// The push service (`apns`, `fcm`, `webpush`).
    public var service: String
    /// Rows waiting.
    public var depth: Int
    /// Rows waiting after at least one failure.
    public var retrying: Int
    /// When the longest-waiting row became due, seconds since 1970; `nil` when none waits.
    public var oldestDueAt: Double?
}

/// A device as the console shows it: no token, no address, no content.
public struct DeviceSummary: Sendable, Equatable {
    /// Its opaque alias.
    public var alias: String
    /// The account's username.
    public var username: String
    /// The push service.
    public var service: String
    /// The app (APNs topic, Android package, the VAPID key's id for Web Push).
    public var app: String
    /// `sandbox` or `production`.
    public var environment: String
    /// When it was last signalled (0: never).
    public var lastSignalAt: Double
    /// The newest modseq signalled to it.
    public var lastSignalledModseq: Int64
    /// The session it registered through, if any.
    public var sessionID: Int64?
    /// The account's id (its change traces are named by it, never by the username).
    public var accountID: Int64 = 0
}

/// A snapshot of the outbox for metrics.
public struct OutboxStats: Sendable, Equatable {
    /// Rows waiting.
    public var depth: Int
    /// Rows waiting after at least one failure.
    public var retrying: Int

    /// Creates a snapshot.
    public init(depth: Int, retrying: Int) {
        self.depth = depth
        self.retrying = retrying
    }
}

/// Totals of the group-commit writer, for metrics and benchmarks.
public struct WriterStatistics: Sendable, Equatable {
    /// Transactions committed (a batch is one).
    public var batches = 0
    /// Writes those transactions held, failed ones included.
    public var writes = 0
    /// Seconds spent in their COMMIT statements (at `synchronous=FULL`, the fsync).
    public var commitSeconds = 0.0

    /// No writes yet.
    public init() {}
}
