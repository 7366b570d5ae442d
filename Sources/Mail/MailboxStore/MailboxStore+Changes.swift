import SQLSupport

extension MailboxStore {
    /// Parses a client's state string for this store: `.malformedState` when it is not a state at all,
    /// `.cannotCalculateChanges` when it belongs to another store.
    public func parseState(_ text: String) throws -> SyncState {
        guard let state = SyncState(parsing: text) else { throw MailboxStoreError.malformedState }
        guard state.epoch == epoch else { throw MailboxStoreError.cannotCalculateChanges }
        return state
    }

    /// The account's modseq as `db` sees it; `.notFound` when there is no such account.
    static func modseq(accountID: Int64, in db: any SQLConnection) throws -> Int64 {
        guard let modseq = try db.scalar("SELECT modseq FROM accounts WHERE id = ?", accountID).int64 else {
            throw MailboxStoreError.notFound
        }
        return modseq
    }

    /// The account's current state.
    public func currentState(accountID: Int64) async throws -> SyncState {
        try await read { db in self.state(try Self.modseq(accountID: accountID, in: db)) }
    }

    /// What changed in the account since `since`, at most `maxChanges` changes per page, in modseq order.
    ///
    /// Throws `.cannotCalculateChanges` when `since` is from another store, older than the account's horizon
    /// (its tombstones were discarded) or newer than the account: the client must resynchronize fully.
    public func changes(accountID: Int64, since: SyncState, maxChanges: Int = 500) async throws -> Changes {
        try await changePage(
            accountID: accountID, since: since, maxChanges: maxChanges,
            from: "\(Self.messageColumns), m.created_modseq FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id",
            item: Self.message(from:))
    }

    /// The ids of what changed, as ``changes(accountID:since:maxChanges:)`` pages them: no message is read whole.
    public func changedIDs(accountID: Int64, since: SyncState, maxChanges: Int = 500) async throws -> ChangedIDs {
        try await changePage(
            accountID: accountID, since: since, maxChanges: maxChanges,
            from: "m.public_id, m.modseq, m.created_modseq FROM messages m", item: { try $0.string("public_id") })
    }

    /// A page of changes with each changed message read by `item` from a row of `SELECT <from>` (which names the
    /// messages `m` and holds `m.modseq` and `m.created_modseq`).
    private func changePage<Item: Sendable>(
        accountID: Int64, since: SyncState, maxChanges: Int, from: String,
        item: @escaping @Sendable (Row) throws -> Item
    ) async throws -> ChangePage<Item> {
        guard since.epoch == epoch else { throw MailboxStoreError.cannotCalculateChanges }
        let limit = max(1, min(maxChanges, 5000))
        return try await read { db in
            guard let account = try db.queryOne("SELECT modseq, horizon_modseq FROM accounts WHERE id = ?", accountID)
            else { throw MailboxStoreError.notFound }
            let current = try account.int64("modseq")
            let horizon = try account.int64("horizon_modseq")
            guard since.modseq >= horizon, since.modseq <= current else {
                throw MailboxStoreError.cannotCalculateChanges
            }
            // Every message change and every destruction has its own modseq, so merging the two logs by
            // modseq and cutting at `limit` gives an exact page boundary.
            let messages = try db.query(
                "SELECT \(from) WHERE m.account_id = ? AND m.modseq > ? ORDER BY m.modseq LIMIT ?", accountID,
                since.modseq, limit + 1)
            let tombstones = try db.query(
                """
                SELECT public_id, created_modseq, modseq FROM tombstones
                WHERE account_id = ? AND modseq > ? ORDER BY modseq LIMIT ?
                """, accountID, since.modseq, limit + 1)
            var created: [Item] = []
            var updated: [Item] = []
            var destroyed: [String] = []
            var m = 0
            var t = 0
            var last = since.modseq
            var taken = 0
            while taken < limit && (m < messages.count || t < tombstones.count) {
                let messageModseq = m < messages.count ? try messages[m].int64("modseq") : Int64.max
                let tombstoneModseq = t < tombstones.count ? try tombstones[t].int64("modseq") : Int64.max
                if messageModseq < tombstoneModseq {
                    let record = try item(messages[m])
                    if try messages[m].int64("created_modseq") > since.modseq {
                        created.append(record)
                    } else {
                        updated.append(record)
                    }
                    last = messageModseq
                    m += 1
                } else {
                    // A message created and destroyed within the window was never seen by the client: skip it.
                    if try tombstones[t].int64("created_modseq") <= since.modseq {
                        destroyed.append(try tombstones[t].string("public_id"))
                    }
                    last = tombstoneModseq
                    t += 1
                }
                taken += 1
            }
            let hasMore = m < messages.count || t < tombstones.count
            return ChangePage(
                oldState: since, newState: self.state(hasMore ? last : current), hasMore: hasMore, created: created,
                updated: updated, destroyed: destroyed)
        }
    }
}
