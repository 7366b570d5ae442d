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
    /// The mailbox `role` of the account, its messages in UID order, in one read.
    public func mailboxListing(accountID: Int64, mailbox role: MailboxRole) async throws -> MailboxListing {
        try await read { db in
            guard
                let box = try db.queryOne(
                    """
                    SELECT b.id, b.uid_next, a.modseq FROM mailboxes b JOIN accounts a ON a.id = b.account_id
                    WHERE b.account_id = ? AND b.role = ?
                    """, accountID, role.rawValue)
            else { throw MailboxStoreError.notFound }
            let mailboxID = try box.int64("id")
            let entries = try db.query(
                """
                SELECT coalesce(uid, created_modseq) AS uid, public_id, seen, flagged, modseq FROM messages
                WHERE mailbox_id = ? ORDER BY uid
                """,
                mailboxID
            ).map { row in
                MailboxListing.Entry(
                    uid: try row.int64("uid"), id: try row.string("public_id"), seen: try row.int64("seen") != 0,
                    flagged: try row.int64("flagged") != 0, modseq: try row.int64("modseq"))
            }
            return MailboxListing(
                mailboxID: mailboxID, modseq: try box.int64("modseq"), uidNext: try box.int64("uid_next"),
                entries: entries)
        }
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
