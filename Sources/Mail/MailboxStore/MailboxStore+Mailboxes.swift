import OpenSSLCrypto
import SQLSupport

/// The user's own mailboxes: made, renamed and destroyed through any door (IMAP CREATE/RENAME/DELETE, JMAP
/// Mailbox/set), each change one modseq of the account, so every door's state moves and its watchers hear of it.
/// The three role mailboxes are made with the account and are never renamed or destroyed.
extension MailboxStore {
    /// The most bytes a mailbox name holds.
    public static let maximumMailboxNameLength = 255
    /// The most mailboxes an account holds, the three of the roles included.
    public static let maximumMailboxesPerAccount = 1000

    /// Checks a mailbox name: 1 to ``maximumMailboxNameLength`` bytes of UTF-8, no control character, and as a
    /// hierarchy (`/` between levels) no empty level. `INBOX` in any case is the inbox's IMAP name, so no other
    /// mailbox may take it.
    static func checkedMailboxName(_ name: String) throws -> String {
        let levels = name.split(separator: "/", omittingEmptySubsequences: false)
        guard (1...maximumMailboxNameLength).contains(name.utf8.count),
            name.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7f }),
            !levels.contains(where: \.isEmpty), name.uppercased() != "INBOX"
        else { throw MailboxStoreError.invalidArgument("mailbox name") }
        return name
    }

    /// Makes a mailbox of the user's named `name`. Throws `.mailboxExists` when the account has one of that name.
    @discardableResult
    public func createMailbox(accountID: Int64, name: String) async throws -> MailboxSummary {
        let name = try Self.checkedMailboxName(name)
        let id = MailboxID(rawValue: "M" + SecureRandom.hex(8))
        let time = clock.secondsSince1970
        do {
            return try await write { db, ledger in
                let held = try db.scalar("SELECT count(*) FROM mailboxes WHERE account_id = ?", accountID).int ?? 0
                guard held < Self.maximumMailboxesPerAccount else {
                    throw MailboxStoreError.invalidArgument(
                        "mailbox count (at most \(Self.maximumMailboxesPerAccount))")
                }
                guard
                    try db.scalar("SELECT 1 FROM mailboxes WHERE account_id = ? AND name = ?", accountID, name).int64
                        == nil
                else { throw MailboxStoreError.mailboxExists }
                let modseq = try Self.bumpModseq(db, account: accountID)
                try db.run(
                    """
                    INSERT INTO mailboxes (account_id, public_id, role, name, uid_next, created_modseq)
                    VALUES (?, ?, NULL, ?, 1, ?)
                    """, accountID, id.rawValue, name, modseq)
                ledger.noteChange(account: accountID, modseq: modseq, at: time)
                return MailboxSummary(id: id, name: name, role: nil, createdModseq: modseq, total: 0, unread: 0)
            }
        } catch MailboxStoreError.storage(let failure) where failure.kind == .uniqueViolation {
            throw MailboxStoreError.mailboxExists
        }
    }

    /// Renames a mailbox of the user's, and with it every mailbox below it in the hierarchy (`Work` → `Jobs` also
    /// makes `Work/2026` `Jobs/2026`, as IMAP's RENAME does). Throws `.roleMailbox` for a role mailbox,
    /// `.mailboxExists` when a new name is taken.
    public func renameMailbox(accountID: Int64, id: MailboxID, to name: String) async throws {
        let name = try Self.checkedMailboxName(name)
        let time = clock.secondsSince1970
        do {
            try await write { db, ledger in
                guard
                    let row = try db.queryOne(
                        "SELECT role, name FROM mailboxes WHERE account_id = ? AND public_id = ?", accountID,
                        id.rawValue)
                else { throw MailboxStoreError.notFound }
                guard row["role"].string == nil else { throw MailboxStoreError.roleMailbox }
                let old = try row.string("name")
                guard old != name else { return }
                let prefix = old + "/"
                let below = try db.query("SELECT name FROM mailboxes WHERE account_id = ?", accountID)
                    .map { try $0.string("name") }.filter { $0.hasPrefix(prefix) }
                let renamed: [(old: String, new: String)] =
                    [(old, name)] + below.map { ($0, name + "/" + $0.dropFirst(prefix.count)) }
                for entry in renamed where entry.new != entry.old {
                    guard
                        try db.scalar(
                            "SELECT 1 FROM mailboxes WHERE account_id = ? AND name = ?", accountID, entry.new
                        ).int64 == nil
                    else { throw MailboxStoreError.mailboxExists }
                }
                // Each to a name no mailbox holds, then to its own: a rename inside the hierarchy (`A` → `A/B`)
                // never meets a name it is about to free.
                let modseq = try Self.bumpModseq(db, account: accountID)
                for (index, entry) in renamed.enumerated() {
                    try db.run(
                        "UPDATE mailboxes SET name = ? WHERE account_id = ? AND name = ?",
                        "\u{1}renaming \(modseq) \(index)", accountID, entry.old)
                }
                for (index, entry) in renamed.enumerated() {
                    try db.run(
                        "UPDATE mailboxes SET name = ? WHERE account_id = ? AND name = ?", entry.new, accountID,
                        "\u{1}renaming \(modseq) \(index)")
                }
                ledger.noteChange(account: accountID, modseq: modseq, at: time)
            }
        } catch MailboxStoreError.storage(let failure) where failure.kind == .uniqueViolation {
            throw MailboxStoreError.mailboxExists
        }
    }

    /// Destroys a mailbox of the user's. Its messages are destroyed with it when `removingMessages` (IMAP's
    /// DELETE; JMAP's `onDestroyRemoveEmails`), each leaving its tombstone as a destroyed message does; otherwise a
    /// mailbox that holds any is kept and `.mailboxHasMessages` thrown. Mailboxes below it in the hierarchy stay.
    public func destroyMailbox(accountID: Int64, id: MailboxID, removingMessages: Bool) async throws {
        let time = clock.secondsSince1970
        try await write { db, ledger in
            guard
                let row = try db.queryOne(
                    "SELECT id, role FROM mailboxes WHERE account_id = ? AND public_id = ?", accountID, id.rawValue)
            else { throw MailboxStoreError.notFound }
            guard row["role"].string == nil else { throw MailboxStoreError.roleMailbox }
            let mailbox = try row.int64("id")
            let messages = try db.query(
                "SELECT public_id, created_modseq, blob_hash FROM messages WHERE mailbox_id = ?", mailbox)
            guard messages.isEmpty || removingMessages else { throw MailboxStoreError.mailboxHasMessages }
            let modseq = try Self.bumpModseq(db, account: accountID)
            for message in messages {
                try db.run(
                    """
                    INSERT INTO tombstones (account_id, public_id, created_modseq, modseq, destroyed_at)
                    VALUES (?, ?, ?, ?, ?)
                    """, accountID, try message.string("public_id"), try message.int64("created_modseq"), modseq, time)
            }
            try db.run("DELETE FROM messages WHERE mailbox_id = ?", mailbox)
            for hash in Set(messages.compactMap { $0["blob_hash"].string }) {
                try db.run(
                    "DELETE FROM blobs WHERE hash = ? AND NOT EXISTS (SELECT 1 FROM messages WHERE blob_hash = ?)",
                    hash, hash)
            }
            try db.run("DELETE FROM mailboxes WHERE id = ?", mailbox)
            try db.run(
                "INSERT INTO mailbox_tombstones (account_id, public_id, modseq) VALUES (?, ?, ?)", accountID,
                id.rawValue, modseq)
            if messages.isEmpty {
                ledger.noteChange(account: accountID, modseq: modseq, at: time)
            } else {
                // Destroyed messages are a change the account's devices sync.
                try self.enqueueSignals(db, ledger, account: accountID, modseq: modseq)
            }
        }
    }

    /// The id of the account's mailbox named `name`, if it has one.
    public func mailboxID(accountID: Int64, named name: String) async throws -> MailboxID? {
        try await read { db in
            try db.scalar("SELECT public_id FROM mailboxes WHERE account_id = ? AND name = ?", accountID, name).string
                .map(MailboxID.init(rawValue:))
        }
    }

    /// The ids of the account's mailboxes destroyed after `since` (Mailbox/changes' `destroyed`).
    public func destroyedMailboxes(accountID: Int64, since: Int64) async throws -> [MailboxID] {
        try await read { db in
            try db.query(
                "SELECT public_id FROM mailbox_tombstones WHERE account_id = ? AND modseq > ? ORDER BY modseq",
                accountID, since
            ).map { MailboxID(rawValue: try $0.string("public_id")) }
        }
    }
}

/// A message's keywords beyond `seen` and `flagged`.
extension MailboxStore {
    /// The most keywords a message holds beside `$seen` and `$flagged`.
    public static let maximumKeywordsPerMessage = 64

    /// A keyword as the store keeps it: lowercased (keywords are case-insensitive, RFC 8621 section 4.1.1), 1 to 255
    /// characters of printable ASCII without `( ) { ] % * " \` (IMAP's atom, which JMAP's keywords are). `$seen`
    /// and `$flagged` are no keywords here: they are the `seen` and `flagged` columns.
    static func keyword(_ keyword: String) throws -> String {
        let lowered = keyword.lowercased()
        guard (1...255).contains(lowered.utf8.count),
            lowered.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f && !Array("(){]%*\"\\".utf8).contains($0) }),
            lowered != "$seen", lowered != "$flagged"
        else { throw MailboxStoreError.invalidArgument("keyword") }
        return lowered
    }

    /// The keywords of a `keywords` column.
    static func keywords(in column: String) -> [String] {
        column.isEmpty ? [] : column.split(separator: " ").map(String.init)
    }
}
