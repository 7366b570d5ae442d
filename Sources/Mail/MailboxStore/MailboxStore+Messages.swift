import Durations
import Foundation
import JSONText
import OpenSSLCrypto
import SQLSupport

extension MailboxStore {
    /// The most bytes a preview holds.
    public static let previewLength = 120

    static let messageColumns = """
        m.public_id, b.public_id AS mailbox, m.from_addr, m.to_addr, m.subject, m.preview, m.body, m.size, m.received_at, m.seen,
        m.flagged, m.modseq, m.message_id, m.in_reply_to, m.to_json, m.cc_json, m.sent_at, m.attachments_json,
        m.keywords
        """
    /// A message from a row holding ``messageColumns``, by column name.
    static func message(from row: Row) throws -> MessageRecord {
        MessageRecord(
            id: try row.string("public_id"), mailbox: MailboxID(rawValue: try row.string("mailbox")),
            from: try row.string("from_addr"), to: try row.string("to_addr"), subject: try row.string("subject"),
            preview: try row.string("preview"), body: try row.string("body"), size: try row.int("size"),
            receivedAt: try row.double("received_at"), seen: try row.int64("seen") != 0,
            flagged: try row.int64("flagged") != 0, modseq: try row.int64("modseq"),
            messageID: row["message_id"].string, inReplyTo: row["in_reply_to"].string,
            recipients: decodeList(row["to_json"].string), cc: decodeList(row["cc_json"].string),
            sentAt: row["sent_at"].double, attachments: decodeList(row["attachments_json"].string),
            keywords: keywords(in: try row.string("keywords")))
    }

    /// A JSON array column (`'[]'` when empty, the common case, read without parsing); an element not of the
    /// column's shape is left out.
    static func decodeList<T: JSONColumnElement>(_ text: String?) -> [T] {
        guard let text, text != "[]", let elements = JSONValue.parse(text)?.array else { return [] }
        return elements.compactMap(T.init(column:))
    }

    /// The usernames mail to `address` (already lowercased) may be for, in the order they are tried: the address
    /// itself, then the part before its domain (`alice@example.com` → `alice`: an account's address is its username
    /// at any domain).
    static func candidateUsernames(for address: String) -> [String] {
        guard let at = address.lastIndex(of: "@"), at != address.startIndex else { return [address] }
        return [address, String(address[..<at])]
    }

    /// The account mail to `address` goes to, if any.
    static func recipient(
        _ ledger: BatchLedger, _ db: any SQLConnection, address: String
    ) throws -> BatchLedger.Recipient? {
        for username in candidateUsernames(for: address) {
            if let found = try ledger.recipient(db, username: username) { return found }
        }
        return nil
    }

    /// Whether an account receives mail at `address` (its username, or its username at any domain).
    public func recipientExists(address: String) async throws -> Bool {
        try await read { db in
            for username in Self.candidateUsernames(for: address.lowercased())
            where try db.scalar("SELECT 1 FROM accounts WHERE username = ?", username).int64 != nil {
                return true
            }
            return false
        }
    }

    /// A new message id: 24 lowercase hex characters, the delivery time in milliseconds (12) then 48 random bits
    /// (12). Ids of messages delivered close together sort together, so a batch of deliveries adds to one or two
    /// pages of the id index instead of one scattered page per message.
    static func newMessageID(time: Double) -> String {
        let milliseconds = UInt64(max(0, time * 1000)) & 0xffff_ffff_ffff
        let digits = String(milliseconds, radix: 16)
        return String(repeating: "0", count: 12 - digits.count) + digits + SecureRandom.hex(6)
    }

    /// The body's first `previewLength` characters with each run of line breaks folded into one space (leading
    /// and trailing breaks dropped). Only the start of the body is examined.
    static func preview(of body: String) -> String {
        asciiPreview(of: body) ?? characterPreview(of: body)
    }

    /// ``preview(of:)`` on bytes, for a body whose preview comes from ASCII alone; `nil` otherwise (a non-ASCII
    /// byte before the cut, or right after it, where it could combine with the last character).
    static func asciiPreview(of body: String) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(previewLength)
        var pendingSpace = false
        var iterator = body.utf8.makeIterator()
        while let byte = iterator.next() {
            if byte >= 0x80 { return nil }
            if byte >= 0x0A && byte <= 0x0D {  // LF, VT, FF, CR: the ASCII line breaks
                pendingSpace = !bytes.isEmpty
                continue
            }
            if pendingSpace {
                bytes.append(0x20)
                pendingSpace = false
                if bytes.count == previewLength { break }
            }
            bytes.append(byte)
            if bytes.count == previewLength { break }
        }
        if bytes.count == previewLength, let next = iterator.next(), next >= 0x80 { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func characterPreview(of body: String) -> String {
        // Cut after the first `previewLength + 1` characters that are not line breaks: everything the preview
        // can hold comes before that point.
        var seen = 0
        var end = body.endIndex
        for index in body.indices where !body[index].isNewline {
            seen += 1
            if seen > previewLength {
                end = index
                break
            }
        }
        return String(body[..<end].split(whereSeparator: \.isNewline).joined(separator: " ").prefix(previewLength))
    }

    /// Stores a delivered message in the recipient's inbox, in one transaction with its modseq bump and the
    /// outbox upsert for each of the account's devices. Deliveries committed together share those two steps:
    /// the batch's ledger writes each account's newest modseq and its outbox rows once (see `BatchLedger`).
    public func deliver(_ message: NewMessage) async throws -> DeliveryReceipt {
        let delivery = delivery(of: message)
        let stored = try await write(defers: true, delivery.write)
        return delivery.receipt(stored)
    }

    /// ``deliver(_:)`` for a caller on a thread of its own that is told when the message is committed (the LMTP
    /// listener's sessions, the inline `POST /v1/deliveries`): the message goes to the engine from where its bytes
    /// are, and `completion` gets the receipt on the engine's thread once the transaction committed (SQLite's writer,
    /// a PostgreSQL connection's thread), with no task and no hop through the cooperative pool. Errors are those of
    /// ``deliver(_:)``. `completion` must return quickly: the engine's thread waits for it.
    public func deliver(
        _ message: NewMessage, completion: @escaping @Sendable (Result<DeliveryReceipt, any Error>) -> Void
    ) {
        let delivery = delivery(of: message)
        engine.submitWrite(defers: true, delivery.write) { result in
            completion(result.map(delivery.receipt).mapError(Self.storageError))
        }
    }

    /// One delivery's transaction and the receipt made from what it stored: the store's account, message id and
    /// modseq.
    private func delivery(
        of message: NewMessage
    ) -> (
        write: @Sendable (any SQLConnection, BatchLedger) throws -> (Int64, String, Int64),
        receipt: @Sendable ((Int64, String, Int64)) -> DeliveryReceipt
    ) {
        let received = message.receivedAt ?? clock.secondsSince1970
        let id = Self.newMessageID(time: clock.secondsSince1970)
        let preview = Self.preview(of: message.body)
        let recipient = message.to.lowercased()
        let blobHash = message.raw.map { Hex.encode(SHA256.hash($0)) }
        let ingestKey = message.deduplicates ? blobHash : nil
        // Written before the transaction, so the writer (one thread for every delivery) spends no time on them.
        let (to, cc, attachments) = (message.recipients.json, message.cc.json, message.attachments.json)
        let write: @Sendable (any SQLConnection, BatchLedger) throws -> (Int64, String, Int64) = { db, ledger in
            let keywords = try Set(message.keywords.map(Self.keyword)).sorted().joined(separator: " ")
            guard let target = try Self.recipient(ledger, db, address: recipient) else {
                throw MailboxStoreError.notFound
            }
            if let ingestKey,
                let existing = try db.scalar(
                    "SELECT public_id FROM messages WHERE account_id = ? AND ingest_key = ?", target.account, ingestKey
                ).string
            {
                return (target.account, existing, try ledger.nextModseq(db, account: target.account) - 1)
            }
            var mailbox = target.inbox
            if message.mailbox != .inbox {
                guard
                    let id = try db.scalar(
                        "SELECT id FROM mailboxes WHERE account_id = ? AND public_id = ?", target.account,
                        message.mailbox.rawValue
                    ).int64
                else { throw MailboxStoreError.notFound }
                mailbox = id
            }
            let modseq = try ledger.nextModseq(db, account: target.account)
            if let raw = message.raw, let blobHash {
                try db.runDeferred(
                    "INSERT INTO blobs (hash, bytes) VALUES (?, ?) ON CONFLICT (hash) DO NOTHING", blobHash, raw)
            }
            // Deferred: on PostgreSQL these go out with the modseq's statement, in one round trip.
            try db.runDeferred(
                """
                INSERT INTO messages (public_id, account_id, mailbox_id, from_addr, to_addr, subject, preview, body,
                                      size, received_at, created_modseq, modseq, message_id, in_reply_to, to_json,
                                      cc_json, sent_at, attachments_json, html_body, blob_hash, ingest_key, uid,
                                      seen, flagged, keywords)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                arguments: [
                    id, target.account, mailbox, message.from, recipient, message.subject, preview,
                    message.body, message.body.utf8.count, received, modseq, modseq, message.messageID,
                    message.inReplyTo, to, cc, message.sentAt, attachments, message.htmlBody, blobHash, ingestKey,
                    modseq, message.seen ? 1 : 0, message.flagged ? 1 : 0, keywords,
                ])
            try db.runDeferred("UPDATE mailboxes SET uid_next = ? WHERE id = ?", modseq + 1, mailbox)
            ledger.use(modseq, account: target.account)
            return (target.account, id, modseq)
        }
        let epoch = epoch
        return (
            write,
            { stored in
                DeliveryReceipt(
                    id: stored.1, state: SyncState(epoch: epoch, modseq: stored.2), accountID: stored.0,
                    duplicate: stored.1 != id)
            }
        )
    }

    /// Where the message's RFC 5322 form comes from, if the account has the message and it has one: the bytes an
    /// MTA sent, or the fields of a `POST /v1/deliveries` (a message with a Message-ID and no blob), which make the
    /// same bytes every time they are composed.
    public func messageSource(id: String, accountID: Int64) async throws -> MessageSource? {
        try await messageSources(ids: [id], accountID: accountID)[id]
    }

    /// The sources of the account's messages with these ids, by id, in one read (see ``messageSource(id:accountID:)``).
    public func messageSources(ids: [String], accountID: Int64) async throws -> [String: MessageSource] {
        guard !ids.isEmpty else { return [:] }
        return try await read { db in try Self.messageSources(ids: ids, accountID: accountID, in: db) }
    }

    static func messageSources(
        ids: [String], accountID: Int64, in db: any SQLConnection
    ) throws -> [String: MessageSource] {
        guard !ids.isEmpty else { return [:] }
        let placeholders = ids.map { _ in "?" }.joined(separator: ", ")
        let arguments: [any SQLBindable] = [accountID] + ids
        var sources: [String: MessageSource] = [:]
        // `+`: each id through the ids' unique index, not a walk over the account's messages.
        for row in try db.query(
            """
            SELECT m.public_id, b.bytes, m.from_addr, m.to_json, m.subject, m.body, m.sent_at, m.message_id
            FROM messages m LEFT JOIN blobs b ON b.hash = m.blob_hash
            WHERE +m.account_id = ? AND m.public_id IN (\(placeholders))
            """, arguments: arguments)
        {
            let id = try row.string("public_id")
            if let bytes = row["bytes"].bytes {
                sources[id] = .stored(bytes)
                continue
            }
            let recipients: [MailAddress] = Self.decodeList(row["to_json"].string)
            guard let messageID = row["message_id"].string, let to = recipients.first?.address,
                let sentAt = row["sent_at"].double
            else { continue }
            sources[id] = .fields(
                DeliveredFields(
                    from: try row.string("from_addr"), to: to, subject: try row.string("subject"),
                    body: try row.string("body"), sentAt: sentAt, messageID: messageID))
        }
        return sources
    }

    /// One message of the account, if it has it.
    public func message(id: String, accountID: Int64) async throws -> MessageRecord? {
        try await read { db in
            try db.queryOne(
                """
                SELECT \(Self.messageColumns), m.html_body FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id
                WHERE m.public_id = ? AND m.account_id = ?
                """, id, accountID
            ).map { row in
                var record = try Self.message(from: row)
                record.htmlBody = row["html_body"].string
                return record
            }
        }
    }

    /// A page of the account's messages (optionally one mailbox), oldest first, with the state it was read at.
    /// `cursor` is the `nextCursor` of the previous page.
    public func listMessages(
        accountID: Int64, mailbox: MailboxID? = nil, cursor: String? = nil, limit: Int = 100
    ) async throws -> MessagePage {
        var after: Int64 = 0
        if let cursor {
            // Digits only (no sign, at most 18): the spelling `nextCursor` writes.
            guard (1...18).contains(cursor.utf8.count), cursor.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                let value = Int64(cursor)
            else { throw MailboxStoreError.invalidArgument("cursor") }
            after = value
        }
        let pageSize = max(1, min(limit, 1000))
        let start = after
        return try await read { db in
            let modseq = try Self.modseq(accountID: accountID, in: db)
            let rows = try db.query(
                """
                SELECT \(Self.messageColumns), m.id AS row_id FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id
                WHERE m.account_id = ? AND m.id > ? AND (CAST(? AS TEXT) IS NULL OR b.public_id = ?)
                ORDER BY m.id LIMIT ?
                """, accountID, start, mailbox?.rawValue, mailbox?.rawValue, pageSize + 1)
            let page = rows.prefix(pageSize)
            let next = rows.count > pageSize ? try page.last.map { String(try $0.int64("row_id")) } : nil
            return MessagePage(
                messages: try page.map(Self.message(from:)), state: self.state(modseq), nextCursor: next)
        }
    }

    /// The account's mailboxes with their totals and unread counts.
    public func mailboxes(accountID: Int64) async throws -> [MailboxSummary] {
        try await read { db in
            try db.query(
                """
                SELECT b.public_id, b.role, b.name, b.created_modseq, count(m.id) AS total,
                       coalesce(sum(CASE WHEN m.seen = 0 THEN 1 ELSE 0 END), 0) AS unread
                FROM mailboxes b LEFT JOIN messages m ON m.mailbox_id = b.id
                WHERE b.account_id = ? GROUP BY b.id, b.public_id, b.role, b.name, b.created_modseq ORDER BY b.id
                """, accountID
            ).map { row in
                var role: MailboxRole?
                if let name = row["role"].string {
                    guard let known = MailboxRole(rawValue: name) else {
                        throw RowDecodingError(column: "role", expected: "a mailbox role")
                    }
                    role = known
                }
                return MailboxSummary(
                    id: MailboxID(rawValue: try row.string("public_id")), name: try row.string("name"), role: role,
                    createdModseq: try row.int64("created_modseq"), total: try row.int("total"),
                    unread: try row.int("unread"))
            }
        }
    }

    /// Unread messages in the account's inbox: the badge.
    public func unreadCount(accountID: Int64) async throws -> Int {
        try await read { db in try Self.unreadCount(db, accountID: accountID) }
    }

    static func unreadCount(_ db: any SQLConnection, accountID: Int64) throws -> Int {
        try db.scalar(
            """
            SELECT count(*) FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id
            WHERE b.account_id = ? AND b.role = 'inbox' AND m.seen = 0
            """, accountID
        ).int ?? 0
    }

    /// Sets a message's flags and/or moves it. Bumps the modseq and signals the account's devices only when
    /// something changed. Returns the message as it is afterwards.
    @discardableResult
    public func updateMessage(
        id: String, accountID: Int64, seen: Bool? = nil, flagged: Bool? = nil, mailbox: MailboxID? = nil,
        addingKeywords: Set<String> = [], removingKeywords: Set<String> = []
    ) async throws -> MessageRecord {
        let adding = try Set(addingKeywords.map(Self.keyword))
        let removing = try Set(removingKeywords.map(Self.keyword))
        return try await write { db, ledger in
            guard
                let current = try db.queryOne(
                    """
                    SELECT \(Self.messageColumns) FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id
                    WHERE m.public_id = ? AND m.account_id = ?
                    """, id, accountID
                ).map(Self.message(from:))
            else { throw MailboxStoreError.notFound }
            var updated = current
            if let seen { updated.seen = seen }
            if let flagged { updated.flagged = flagged }
            if let mailbox { updated.mailbox = mailbox }
            updated.keywords = Set(current.keywords).union(adding).subtracting(removing).sorted()
            guard updated.keywords.count <= Self.maximumKeywordsPerMessage else {
                throw MailboxStoreError.invalidArgument(
                    "keywords (at most \(Self.maximumKeywordsPerMessage) a message)")
            }
            guard updated != current else { return current }
            if updated.mailbox != current.mailbox,
                try db.scalar(
                    "SELECT 1 FROM mailboxes WHERE account_id = ? AND public_id = ?", accountID,
                    updated.mailbox.rawValue
                ).int64 == nil
            {
                throw MailboxStoreError.invalidArgument("mailbox")
            }
            let modseq = try Self.bumpModseq(db, account: accountID)
            // A move gives the message a new IMAP UID in its new mailbox: the move's modseq.
            let uid: Int64? = updated.mailbox != current.mailbox ? modseq : nil
            try db.run(
                """
                UPDATE messages SET seen = ?, flagged = ?, keywords = ?, modseq = ?, uid = coalesce(?, uid),
                    mailbox_id = (SELECT id FROM mailboxes WHERE account_id = ? AND public_id = ?)
                WHERE public_id = ? AND account_id = ?
                """,
                arguments: [
                    updated.seen, updated.flagged, updated.keywords.joined(separator: " "), modseq, uid, accountID,
                    updated.mailbox.rawValue, id, accountID,
                ])
            if let uid {
                try db.run(
                    "UPDATE mailboxes SET uid_next = ? WHERE account_id = ? AND public_id = ?", uid + 1, accountID,
                    updated.mailbox.rawValue)
            }
            try self.enqueueSignals(db, ledger, account: accountID, modseq: modseq)
            updated.modseq = modseq
            return updated
        }
    }

    /// Destroys a message for good, leaving a tombstone for delta sync. Returns the account's new state.
    @discardableResult
    public func destroyMessage(id: String, accountID: Int64) async throws -> SyncState {
        let destroyed = clock.secondsSince1970
        let modseq = try await write { db, ledger -> Int64 in
            guard
                let row = try db.queryOne(
                    "SELECT created_modseq, blob_hash FROM messages WHERE public_id = ? AND account_id = ?", id,
                    accountID),
                let createdModseq = row["created_modseq"].int64
            else { throw MailboxStoreError.notFound }
            let modseq = try Self.bumpModseq(db, account: accountID)
            try db.run("DELETE FROM messages WHERE public_id = ? AND account_id = ?", id, accountID)
            if let blobHash = row["blob_hash"].string {
                // The raw bytes go with the last message that holds them.
                try db.run(
                    "DELETE FROM blobs WHERE hash = ? AND NOT EXISTS (SELECT 1 FROM messages WHERE blob_hash = ?)",
                    blobHash, blobHash)
            }
            try db.run(
                """
                INSERT INTO tombstones (account_id, public_id, created_modseq, modseq, destroyed_at)
                VALUES (?, ?, ?, ?, ?)
                """, accountID, id, createdModseq, modseq, destroyed)
            try self.enqueueSignals(db, ledger, account: accountID, modseq: modseq)
            return modseq
        }
        return state(modseq)
    }

    /// Discards tombstones older than the retention period and raises each account's horizon past them.
    /// Returns how many were discarded.
    @discardableResult
    public func purgeTombstones() async throws -> Int {
        let cutoff = clock.secondsSince1970 - configuration.tombstoneRetention
        return try await write { db, _ in
            try db.run(
                """
                UPDATE accounts SET horizon_modseq = \(db.dialect.greatest("horizon_modseq", """
                    (SELECT max(t.modseq) FROM tombstones t WHERE t.account_id = accounts.id AND t.destroyed_at < ?)
                    """))
                WHERE EXISTS (SELECT 1 FROM tombstones t WHERE t.account_id = accounts.id AND t.destroyed_at < ?)
                """, cutoff, cutoff)
            return try db.run("DELETE FROM tombstones WHERE destroyed_at < ?", cutoff)
        }
    }
}
