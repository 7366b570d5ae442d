import Foundation
import SQLSupport

/// A mailbox as IMAP sees it: its messages by UID with their flags and modseqs.
public struct MailboxListing: Sendable, Equatable {
    /// One message of the listing.
    public struct Entry: Sendable, Equatable {
        /// The message's UID in the mailbox.
        public var uid: Int64
        /// The message id.
        public var id: String
        /// Read.
        public var seen: Bool
        /// Flagged.
        public var flagged: Bool
        /// Its other keywords (``MessageRecord/keywords``).
        public var keywords: [String] = []
        /// Its last change's modseq.
        public var modseq: Int64
    }

    /// The mailbox's row id (stable for the mailbox's life).
    public var mailboxID: Int64
    /// The account's modseq when read: above every modseq given so far.
    public var modseq: Int64
    /// One past the highest UID the mailbox ever gave (IMAP's UIDNEXT).
    public var uidNext: Int64
    /// The messages, by ascending UID.
    public var entries: [Entry]
}

extension MailboxStore {
    /// The account's mailbox `mailbox`, its messages in UID order, in one read.
    public func mailboxListing(accountID: Int64, mailbox: MailboxID) async throws -> MailboxListing {
        try await read { db in
            let box = try Self.imapMailbox(db, accountID: accountID, mailbox: mailbox)
            let mailboxID = try box.int64("id")
            let entries = try db.query(
                """
                SELECT coalesce(uid, created_modseq) AS uid, public_id, seen, flagged, modseq, keywords FROM messages
                WHERE mailbox_id = ? ORDER BY messages.uid
                """,
                mailboxID
            ).map(Self.listingEntry)
            return MailboxListing(
                mailboxID: mailboxID, modseq: try box.int64("modseq"), uidNext: try box.int64("uid_next"),
                entries: entries)
        }
    }

    /// The row id of the account's mailbox `mailbox` (stable for the mailbox's life: what IMAP's UIDVALIDITY is made
    /// of), in one small read, without its messages.
    public func mailboxRowID(accountID: Int64, mailbox: MailboxID) async throws -> Int64 {
        try await read { db in try Self.imapMailbox(db, accountID: accountID, mailbox: mailbox).int64("id") }
    }

    /// The account's mailbox `mailbox` with what IMAP reads of it and its account: `id`, `uid_next`, `modseq` and
    /// `horizon_modseq`.
    static func imapMailbox(_ db: any SQLConnection, accountID: Int64, mailbox: MailboxID) throws -> Row {
        guard
            let box = try db.queryOne(
                """
                SELECT b.id, b.uid_next, a.modseq, a.horizon_modseq
                FROM mailboxes b JOIN accounts a ON a.id = b.account_id
                WHERE b.account_id = ? AND b.public_id = ?
                """, accountID, mailbox.rawValue)
        else { throw MailboxStoreError.notFound }
        return box
    }

    /// A listing entry from a row holding `uid`, `public_id`, `seen`, `flagged`, `modseq` and `keywords`.
    static func listingEntry(_ row: Row) throws -> MailboxListing.Entry {
        MailboxListing.Entry(
            uid: try row.int64("uid"), id: try row.string("public_id"), seen: try row.int64("seen") != 0,
            flagged: try row.int64("flagged") != 0, keywords: Self.keywords(in: try row.string("keywords")),
            modseq: try row.int64("modseq"))
    }

    /// The UID of message `id` in its mailbox now.
    public func messageUID(id: String, accountID: Int64) async throws -> Int64 {
        try await read { db in
            guard
                let uid = try db.scalar(
                    "SELECT uid FROM messages WHERE public_id = ? AND account_id = ?", id, accountID
                ).int64
            else { throw MailboxStoreError.notFound }
            return uid
        }
    }
}

/// What changed in one mailbox since a modseq: the messages in it whose modseq is newer (arrived, moved in or
/// flagged), and the ids of those that left it since (moved out or destroyed).
public struct MailboxDelta: Sendable, Equatable {
    /// Messages in the mailbox changed since, by ascending UID; `movedIn` marks those whose UID came from a move.
    public var entries: [MailboxListing.Entry]
    /// Ids among `entries` that came in by a move (they may have been here before under another UID).
    public var movedIn: Set<String>
    /// Ids of messages that left the mailbox (or the store) since.
    public var left: [String]
    /// The account's modseq when read.
    public var modseq: Int64
    /// The mailbox's UIDNEXT.
    public var uidNext: Int64
}

extension MailboxStore {
    /// What changed in mailbox `mailbox` since `since`: work in proportion to the changes, not to the mailbox, so an IDLE
    /// connection woken by a commit reads one delivery, not its whole mailbox. `nil` when `since` is older than the
    /// destructions the store still remembers (then only a whole listing can say what left).
    public func mailboxDelta(accountID: Int64, mailbox: MailboxID, since: Int64) async throws -> MailboxDelta? {
        try await read { db in
            let box = try Self.imapMailbox(db, accountID: accountID, mailbox: mailbox)
            guard since >= (try box.int64("horizon_modseq")) else { return nil }
            let mailboxID = try box.int64("id")
            var movedIn: Set<String> = []
            let entries = try db.query(
                """
                SELECT coalesce(uid, created_modseq) AS uid, created_modseq, public_id, seen, flagged, modseq, keywords
                FROM messages WHERE account_id = ? AND modseq > ? AND mailbox_id = ? ORDER BY uid
                """, accountID, since, mailboxID
            ).map { row in
                let entry = try Self.listingEntry(row)
                // Moved in since (its UID is the modseq it came in at): it may have been here before under another
                // UID, which is gone. One moved in earlier and changed since was here under this UID all along.
                if entry.uid != (try row.int64("created_modseq")), entry.uid > since { movedIn.insert(entry.id) }
                return entry
            }
            // A message's UID is the modseq it entered its mailbox at, so one elsewhere with a UID up to `since` was
            // elsewhere already then and cannot have left this mailbox since: a flag changed in another mailbox is
            // not a departure from this one, and costs the reader nothing.
            var left = try db.query(
                """
                SELECT public_id FROM messages
                WHERE account_id = ? AND modseq > ? AND mailbox_id <> ? AND coalesce(uid, created_modseq) > ?
                """, accountID, since, mailboxID, since
            ).map { try $0.string("public_id") }
            left += try db.query(
                "SELECT public_id FROM tombstones WHERE account_id = ? AND modseq > ?", accountID, since
            ).map { try $0.string("public_id") }
            return MailboxDelta(
                entries: entries, movedIn: movedIn, left: left, modseq: try box.int64("modseq"),
                uidNext: try box.int64("uid_next"))
        }
    }
}
