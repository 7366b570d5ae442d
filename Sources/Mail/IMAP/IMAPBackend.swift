/// What the IMAP server needs from the mailbox. Each call is made on the loop's thread and must not block: it
/// answers through `completion`, once, from any thread.
public protocol IMAPBackend: Sendable {
    /// Checks a username and password (with the service's sign-in throttle) for a client at `address`.
    func login(
        username: String, password: String, address: String, completion: @escaping @Sendable (IMAPLoginResult) -> Void)
    /// The account's mailboxes with their counts.
    func mailboxes(
        account: Int64, completion: @escaping @Sendable (Result<[IMAPMailboxInfo], IMAPBackendError>) -> Void)
    /// One mailbox by IMAP name (`INBOX` in any case) and the state of each of its messages.
    func snapshot(
        account: Int64, mailbox: String,
        completion: @escaping @Sendable (Result<IMAPMailboxSnapshot, IMAPBackendError>) -> Void)
    /// What changed in a mailbox since `highestModseq` (a HIGHESTMODSEQ this backend gave): `nil` in the result when
    /// only a whole ``snapshot(account:mailbox:completion:)`` can tell.
    func delta(
        account: Int64, mailbox: String, since highestModseq: Int64,
        completion: @escaping @Sendable (Result<IMAPMailboxDelta?, IMAPBackendError>) -> Void)
    /// The messages with these ids, with their RFC 5322 bytes.
    func contents(
        account: Int64, ids: [String],
        completion: @escaping @Sendable (Result<[String: IMAPMessageContent], IMAPBackendError>) -> Void)
    /// Sets flags; answers each message's state afterwards (its new modseq).
    func setFlags(
        account: Int64, changes: [IMAPFlagChange],
        completion: @escaping @Sendable (Result<[IMAPMessageState], IMAPBackendError>) -> Void)
    /// Moves messages to another mailbox (by IMAP name); answers their states there (their new UIDs), in order.
    func move(
        account: Int64, ids: [String], to mailbox: String,
        completion: @escaping @Sendable (Result<IMAPMoveResult, IMAPBackendError>) -> Void)
    /// Files a new message (RFC 5322 bytes) in a mailbox (by IMAP name) with its flags and INTERNALDATE (nil: now);
    /// answers where it went. The message counts against the account like any delivery.
    func append(
        account: Int64, mailbox: String, message: IMAPNewMessage,
        completion: @escaping @Sendable (Result<IMAPMoveResult, IMAPBackendError>) -> Void)
    /// Copies messages to another mailbox (by IMAP name): each copy is a new message with the same bytes, flags and
    /// INTERNALDATE; answers the copies' states there, in order.
    func copy(
        account: Int64, ids: [String], to mailbox: String,
        completion: @escaping @Sendable (Result<IMAPMoveResult, IMAPBackendError>) -> Void)
    /// Makes a mailbox of the user's (IMAP CREATE).
    func createMailbox(
        account: Int64, name: String, completion: @escaping @Sendable (Result<Void, IMAPBackendError>) -> Void)
    /// Destroys a mailbox of the user's with its messages (IMAP DELETE).
    func deleteMailbox(
        account: Int64, name: String, completion: @escaping @Sendable (Result<Void, IMAPBackendError>) -> Void)
    /// Renames a mailbox of the user's and the mailboxes below it (IMAP RENAME).
    func renameMailbox(
        account: Int64, from name: String, to newName: String,
        completion: @escaping @Sendable (Result<Void, IMAPBackendError>) -> Void)
    /// Destroys messages for good.
    func expunge(
        account: Int64, ids: [String], completion: @escaping @Sendable (Result<Void, IMAPBackendError>) -> Void)
    /// Starts telling `connection` (through ``IMAPServer/notify(_:)``'s loop) when the account changes.
    func watch(account: Int64, connection: UInt64)
    /// Stops what ``watch(account:connection:)`` started.
    func unwatch(connection: UInt64)
    /// A client resynchronized a mailbox (SELECT or EXAMINE with QRESYNC) from `since` to `reached`, both
    /// HIGHESTMODSEQs this backend gave: a device's fetch, for whoever traces the loop. Told only; nothing waits.
    func resynchronized(account: Int64, since: Int64, reached: Int64)
}

extension IMAPBackend {
    /// Nothing to tell.
    public func resynchronized(account: Int64, since: Int64, reached: Int64) {}
}

/// How a login went.
public enum IMAPLoginResult: Sendable, Equatable {
    /// The credentials are an account's.
    case accepted(account: Int64)
    /// Wrong username or password.
    case rejected
    /// Too many failures: try later.
    case throttled
    /// The store cannot be reached.
    case unavailable
}

/// Why the backend could not do what was asked.
public enum IMAPBackendError: Error, Sendable, Equatable {
    /// No such mailbox.
    case noMailbox
    /// A message is gone.
    case noMessage
    /// The store cannot be reached now.
    case unavailable
    /// A mailbox of that name exists.
    case mailboxExists
    /// INBOX, Archive and Trash are the store's own: they cannot be renamed or deleted.
    case roleMailbox
    /// A value the store does not take, named (never the value itself): a mailbox name, a keyword, one mailbox or
    /// keyword past the most an account or message holds.
    case invalid(String)
}

/// A mailbox as LIST and STATUS show it.
public struct IMAPMailboxInfo: Sendable, Equatable {
    /// The IMAP name (`INBOX` for the inbox).
    public var name: String
    /// The special-use attribute (RFC 6154), if any: `\Archive`, `\Trash`, ….
    public var specialUse: String?
    /// Messages in it.
    public var messages: Int
    /// Messages without `\Seen`.
    public var unseen: Int

    /// Creates a mailbox description.
    public init(name: String, specialUse: String?, messages: Int, unseen: Int) {
        self.name = name
        self.specialUse = specialUse
        self.messages = messages
        self.unseen = unseen
    }
}

/// One message's state in its mailbox.
public struct IMAPMessageState: Sendable, Equatable {
    /// Its UID in the mailbox.
    public var uid: UInt32
    /// The store's message id.
    public var id: String
    /// `\Seen`.
    public var seen: Bool
    /// `\Flagged`.
    public var flagged: Bool
    /// Its last change's modseq (CONDSTORE's MODSEQ).
    public var modseq: Int64
    /// Its other keywords, lowercased and sorted, as the store keeps them: `$answered` and `$draft` for `\Answered`
    /// and `\Draft`, the others as they are.
    public var keywords: [String]

    /// Creates a state.
    public init(uid: UInt32, id: String, seen: Bool, flagged: Bool, modseq: Int64, keywords: [String] = []) {
        self.uid = uid
        self.id = id
        self.seen = seen
        self.flagged = flagged
        self.modseq = modseq
        self.keywords = keywords
    }
}

/// A selected mailbox at one moment.
public struct IMAPMailboxSnapshot: Sendable, Equatable {
    /// The mailbox.
    public var info: IMAPMailboxInfo
    /// Its UIDVALIDITY.
    public var uidValidity: UInt32
    /// A UID above every UID given so far.
    public var uidNext: UInt32
    /// The highest modseq of the mailbox (the account's: never lower than any message's).
    public var highestModseq: Int64
    /// Its messages in UID order.
    public var messages: [IMAPMessageState]

    /// Creates a snapshot.
    public init(
        info: IMAPMailboxInfo, uidValidity: UInt32, uidNext: UInt32, highestModseq: Int64,
        messages: [IMAPMessageState]
    ) {
        self.info = info
        self.uidValidity = uidValidity
        self.uidNext = uidNext
        self.highestModseq = highestModseq
        self.messages = messages
    }
}

/// A flag change for one message (nil: unchanged).
public struct IMAPFlagChange: Sendable, Equatable {
    /// The message.
    public var id: String
    /// The new `\Seen`.
    public var seen: Bool?
    /// The new `\Flagged`.
    public var flagged: Bool?
    /// Keywords to add (as ``IMAPMessageState/keywords`` spells them).
    public var addingKeywords: Set<String>
    /// Keywords to remove.
    public var removingKeywords: Set<String>

    /// Creates a change.
    public init(
        id: String, seen: Bool?, flagged: Bool?, addingKeywords: Set<String> = [], removingKeywords: Set<String> = []
    ) {
        self.id = id
        self.seen = seen
        self.flagged = flagged
        self.addingKeywords = addingKeywords
        self.removingKeywords = removingKeywords
    }
}

/// What FETCH needs of a message beyond its state.
public struct IMAPMessageContent: Sendable, Equatable {
    /// The RFC 5322 bytes.
    public var raw: [UInt8]
    /// When it arrived (seconds since 1970).
    public var receivedAt: Double
    /// The envelope's fields.
    public var envelope: IMAPEnvelope
    /// The text body, decoded (what SEARCH BODY and TEXT look in beside the raw bytes).
    public var text: String
    /// The Date header, seconds since 1970 (SENTBEFORE, SENTON, SENTSINCE).
    public var sentAt: Double?

    /// Creates a message's content.
    public init(raw: [UInt8], receivedAt: Double, envelope: IMAPEnvelope, text: String = "", sentAt: Double? = nil) {
        self.raw = raw
        self.receivedAt = receivedAt
        self.envelope = envelope
        self.text = text
        self.sentAt = sentAt
    }
}

/// The ENVELOPE's fields, decoded.
public struct IMAPEnvelope: Sendable, Equatable {
    /// The Date header, as written.
    public var date: String?
    /// The subject.
    public var subject: String?
    /// From.
    public var from: [MailAddress]
    /// To.
    public var to: [MailAddress]
    /// Cc.
    public var cc: [MailAddress]
    /// In-Reply-To.
    public var inReplyTo: String?
    /// Message-ID.
    public var messageID: String?

    /// Creates an envelope.
    public init(
        date: String?, subject: String?, from: [MailAddress], to: [MailAddress], cc: [MailAddress],
        inReplyTo: String?, messageID: String?
    ) {
        self.date = date
        self.subject = subject
        self.from = from
        self.to = to
        self.cc = cc
        self.inReplyTo = inReplyTo
        self.messageID = messageID
    }
}

/// A message a client files with APPEND.
public struct IMAPNewMessage: Sendable, Equatable {
    /// The RFC 5322 bytes.
    public var raw: [UInt8]
    /// `\Seen`.
    public var seen: Bool
    /// `\Flagged`.
    public var flagged: Bool
    /// The INTERNALDATE the client gave (seconds since 1970), or nil.
    public var receivedAt: Double?
    /// Its other keywords (``IMAPMessageState/keywords``).
    public var keywords: [String]

    /// Creates a message to file.
    public init(raw: [UInt8], seen: Bool, flagged: Bool, receivedAt: Double?, keywords: [String] = []) {
        self.raw = raw
        self.seen = seen
        self.flagged = flagged
        self.receivedAt = receivedAt
        self.keywords = keywords
    }
}

/// Where a MOVE, COPY or APPEND put the messages.
public struct IMAPMoveResult: Sendable, Equatable {
    /// The target mailbox's UIDVALIDITY.
    public var uidValidity: UInt32
    /// The messages' states there, in the order asked.
    public var states: [IMAPMessageState]

    /// Creates a result.
    public init(uidValidity: UInt32, states: [IMAPMessageState]) {
        self.uidValidity = uidValidity
        self.states = states
    }
}

/// What changed in a selected mailbox since a HIGHESTMODSEQ.
public struct IMAPMailboxDelta: Sendable, Equatable {
    /// Messages in the mailbox changed since (new ones, flags), by ascending UID.
    public var changed: [IMAPMessageState]
    /// Ids among `changed` that came in by a move (they may be here under an older UID).
    public var movedIn: Set<String>
    /// Ids of messages that left the mailbox since.
    public var left: Set<String>
    /// The mailbox's UIDNEXT now.
    public var uidNext: UInt32
    /// The mailbox's HIGHESTMODSEQ now.
    public var highestModseq: Int64

    /// Creates a delta.
    public init(
        changed: [IMAPMessageState], movedIn: Set<String>, left: Set<String>, uidNext: UInt32, highestModseq: Int64
    ) {
        self.changed = changed
        self.movedIn = movedIn
        self.left = left
        self.uidNext = uidNext
        self.highestModseq = highestModseq
    }
}

extension IMAPMailboxSnapshot {
    /// How ``upsert(_:)`` placed a changed message.
    enum Placement {
        /// It was here under the same UID: `old` is what it was, at `index`.
        case updated(index: Int, old: IMAPMessageState)
        /// It is new here (a new UID is above every UID the mailbox gave before it).
        case inserted
    }

    /// The UIDs here of the messages `delta` says left, and of those that came back by a move under a new UID.
    func uidsLeaving(_ delta: IMAPMailboxDelta) -> Set<UInt32> {
        guard !delta.left.isEmpty || !delta.movedIn.isEmpty else { return [] }
        let changedUIDs = Set(delta.changed.map(\.uid))
        var gone: Set<UInt32> = []
        for message in messages
        where (delta.left.contains(message.id) || delta.movedIn.contains(message.id))
            && !changedUIDs.contains(message.uid)
        {
            gone.insert(message.uid)
        }
        return gone
    }

    /// Puts a message the delta changed in its place: over its old state, or in UID order when it is new.
    mutating func upsert(_ change: IMAPMessageState) -> Placement {
        if let index = IMAPSession.index(of: change.uid, in: messages) {
            let old = messages[index]
            messages[index] = change
            return .updated(index: index, old: old)
        }
        let at = messages.lastIndex { $0.uid < change.uid }.map { $0 + 1 } ?? 0
        messages.insert(change, at: at)
        return .inserted
    }

    /// Takes the delta's UIDNEXT and HIGHESTMODSEQ, never moving back.
    mutating func advance(to delta: IMAPMailboxDelta) {
        uidNext = max(uidNext, delta.uidNext)
        highestModseq = max(highestModseq, delta.highestModseq)
    }

    /// `delta` applied whole: the snapshot a full read would give now, counts included. A session applies the same
    /// steps one by one, telling its client of each. The counts follow the changes, with no walk over the mailbox
    /// for them.
    public mutating func apply(_ delta: IMAPMailboxDelta) {
        let gone = uidsLeaving(delta)
        var unseen = info.unseen
        if !gone.isEmpty {
            unseen -= messages.reduce(0) { $0 + (!$1.seen && gone.contains($1.uid) ? 1 : 0) }
            messages.removeAll { gone.contains($0.uid) }
        }
        for change in delta.changed {
            switch upsert(change) {
            case .updated(_, let old): unseen += (change.seen ? 0 : 1) - (old.seen ? 0 : 1)
            case .inserted: unseen += change.seen ? 0 : 1
            }
        }
        advance(to: delta)
        info.messages = messages.count
        info.unseen = unseen
    }
}
