import Foundation
import MailSync
import SQLiteKit

/// A ``MailCacheStore`` in a SQLite file: every page of changes and every full resync is one transaction,
/// so a failure (or a crash) leaves the cache at the previous state.
public final class SQLiteMailCache: MailCacheStore {
    private let pool: DatabasePool

    /// Opens (creating and migrating when needed) the cache at `path`; `:memory:` for a private in-memory one.
    public init(path: String) throws {
        pool = try DatabasePool(path: path)
        try Self.migrator.migrate(pool)
    }

    static let migrator: Migrator = {
        var migrator = Migrator()
        migrator.register("v1-messages") { db in
            try db.execute(
                """
                CREATE TABLE messages (
                    id TEXT PRIMARY KEY NOT NULL CHECK (length(id) > 0),
                    mailbox TEXT NOT NULL,
                    from_address TEXT NOT NULL,
                    to_address TEXT NOT NULL,
                    subject TEXT NOT NULL,
                    preview TEXT NOT NULL,
                    size INTEGER NOT NULL CHECK (size >= 0),
                    received_at REAL NOT NULL,
                    seen INTEGER NOT NULL,
                    flagged INTEGER NOT NULL,
                    body TEXT
                ) WITHOUT ROWID;
                CREATE INDEX messages_by_mailbox ON messages (mailbox, received_at);
                CREATE TABLE sync_meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;
                """)
        }
        // The MIME fields (addresses, ids, dates, attachments, the HTML body) as one JSON object per message.
        migrator.register("v2-mime") { db in
            try db.execute("ALTER TABLE messages ADD COLUMN details TEXT")
        }
        return migrator
    }()

    /// What the `details` column holds.
    private struct Details: Codable {
        var to: [MailAddress]
        var cc: [MailAddress]
        var messageId: String?
        var inReplyTo: String?
        var sentAt: Double?
        var attachments: [MailAttachment]
        var htmlBody: String?
    }

    /// See ``MailCacheStore/state()``.
    public func state() throws -> String? {
        try pool.read { db in try Self.meta("state", db) }
    }

    /// The account the cache belongs to, as recorded by ``bind(toAccount:)``.
    public func accountID() throws -> String? {
        try pool.read { db in try Self.meta("account", db) }
    }

    /// Records that the cache holds `account`'s mail; when it held another account's, empties it first
    /// (messages and state). Returns whether it was emptied.
    @discardableResult
    public func bind(toAccount account: String) throws -> Bool {
        try pool.write { db in
            let previous = try Self.meta("account", db)
            guard previous != account else { return false }
            var cleared = false
            if previous != nil {
                try db.run("DELETE FROM messages")
                try db.run("DELETE FROM sync_meta WHERE key = 'state'")
                cleared = true
            }
            try Self.setMeta("account", account, db)
            return cleared
        }
    }

    /// See ``MailCacheStore/apply(_:)``.
    @discardableResult
    public func apply(_ changes: MessageChanges) throws -> ChangeCounts {
        try pool.write { db in
            var counts = ChangeCounts()
            for message in changes.created + changes.updated {
                if try Self.upsert(message, db) { counts.created += 1 } else { counts.updated += 1 }
            }
            for id in changes.destroyed {
                counts.destroyed += try db.run("DELETE FROM messages WHERE id = ?", id)
            }
            try Self.setMeta("state", changes.newState, db)
            return counts
        }
    }

    /// See ``MailCacheStore/replaceAll(with:state:)``.
    @discardableResult
    public func replaceAll(with messages: [MailMessage], state: String) throws -> ChangeCounts {
        try pool.write { db in
            var counts = ChangeCounts()
            var previous: [String: MailMessage] = [:]
            for row in try db.query("SELECT * FROM messages") {
                let message = Self.message(from: row)
                previous[message.id] = message
            }
            try db.run("DELETE FROM messages")
            var kept = 0
            for message in messages {
                let old = previous[message.id]
                let merged = message.keepingBody(of: old)
                try Self.insert(merged, db)
                if let old {
                    kept += 1
                    if old != merged { counts.updated += 1 }
                } else {
                    counts.created += 1
                }
            }
            counts.destroyed = previous.count - kept
            try Self.setMeta("state", state, db)
            return counts
        }
    }

    /// See ``MailCacheStore/messages(in:)``.
    public func messages(in mailbox: MailboxID?) throws -> [MailMessage] {
        try pool.read { db in
            let rows =
                if let mailbox {
                    try db.query(
                        "SELECT * FROM messages WHERE mailbox = ? ORDER BY received_at DESC, id DESC", mailbox.rawValue)
                } else {
                    try db.query("SELECT * FROM messages ORDER BY received_at DESC, id DESC")
                }
            return rows.map(Self.message(from:))
        }
    }

    /// See ``MailCacheStore/message(id:)``.
    public func message(id: String) throws -> MailMessage? {
        try pool.read { db in try db.queryOne("SELECT * FROM messages WHERE id = ?", id).map(Self.message(from:)) }
    }

    /// See ``MailCacheStore/messageCount()``.
    public func messageCount() throws -> Int {
        try pool.read { db in try db.scalar("SELECT count(*) FROM messages").int ?? 0 }
    }

    /// See ``MailCacheStore/storeBody(_:forMessageID:)``.
    public func storeBody(_ body: String, forMessageID id: String) throws {
        try pool.write { db in _ = try db.run("UPDATE messages SET body = ? WHERE id = ?", body, id) }
    }

    /// See ``MailCacheStore/upsert(_:)``.
    public func upsert(_ message: MailMessage) throws {
        try pool.write { db in _ = try Self.upsert(message, db) }
    }

    /// See ``MailCacheStore/remove(messageID:)``.
    public func remove(messageID id: String) throws {
        try pool.write { db in _ = try db.run("DELETE FROM messages WHERE id = ?", id) }
    }

    /// The result of SQLite's integrity check (`"ok"` when sound).
    public func integrityCheck() throws -> String {
        try pool.read { db in try db.integrityCheck() }
    }

    // MARK: - Rows

    /// Inserts or replaces `message` (keeping cached bodies when it has none); returns whether it was new.
    private static func upsert(_ message: MailMessage, _ db: Database) throws -> Bool {
        let existing = try db.queryOne("SELECT * FROM messages WHERE id = ?", message.id).map(Self.message(from:))
        try db.run(
            """
            INSERT INTO messages (id, mailbox, from_address, to_address, subject, preview, size, received_at,
                                  seen, flagged, body, details)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (id) DO UPDATE SET
                mailbox = excluded.mailbox, from_address = excluded.from_address, to_address = excluded.to_address,
                subject = excluded.subject, preview = excluded.preview, size = excluded.size,
                received_at = excluded.received_at, seen = excluded.seen, flagged = excluded.flagged,
                body = excluded.body, details = excluded.details
            """,
            arguments: arguments(message.keepingBody(of: existing)))
        return existing == nil
    }

    private static func insert(_ message: MailMessage, _ db: Database) throws {
        try db.run(
            """
            INSERT INTO messages (id, mailbox, from_address, to_address, subject, preview, size, received_at,
                                  seen, flagged, body, details)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            arguments: arguments(message))
    }

    private static func arguments(_ message: MailMessage) -> [any SQLBindable] {
        let details = Details(
            to: message.to, cc: message.cc, messageId: message.messageId, inReplyTo: message.inReplyTo,
            sentAt: message.sentAt, attachments: message.attachments, htmlBody: message.htmlBody)
        return [
            message.id, message.mailbox.rawValue, message.from, message.to.map(\.address).joined(separator: ", "),
            message.subject, message.preview, message.size, message.receivedAt, message.seen, message.flagged,
            message.body, (try? JSONEncoder().encode(details)).map { String(decoding: $0, as: UTF8.self) },
        ]
    }

    private static func message(from row: Row) -> MailMessage {
        let details = row["details"].string.flatMap { try? JSONDecoder().decode(Details.self, from: Data($0.utf8)) }
        // A row cached before the MIME fields has its recipient in `to_address` only.
        let to = details?.to ?? (row["to_address"].string.map { [MailAddress(address: $0)] } ?? [])
        return MailMessage(
            id: row["id"].string ?? "", mailbox: MailboxID(rawValue: row["mailbox"].string ?? "inbox"),
            from: row["from_address"].string ?? "", to: to, cc: details?.cc ?? [],
            subject: row["subject"].string ?? "", preview: row["preview"].string ?? "", size: row["size"].int ?? 0,
            receivedAt: row["received_at"].double ?? 0, seen: row["seen"].bool ?? false,
            flagged: row["flagged"].bool ?? false, body: row["body"].string, messageId: details?.messageId,
            inReplyTo: details?.inReplyTo, sentAt: details?.sentAt, attachments: details?.attachments ?? [],
            htmlBody: details?.htmlBody)
    }

    private static func meta(_ key: String, _ db: Database) throws -> String? {
        try db.scalar("SELECT value FROM sync_meta WHERE key = ?", key).string
    }

    private static func setMeta(_ key: String, _ value: String, _ db: Database) throws {
        try db.run(
            "INSERT INTO sync_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            key, value)
    }
}
