import SQLSupport

extension MailboxStore {
    /// Claims up to `limit` due outbox rows: each is leased to this process (``Configuration/instanceID``) and not
    /// claimable again until the lease ends, and comes with the account's state and unread count as they are now.
    /// Where several processes claim at once, each skips the rows another is claiming, so no row goes to two.
    public func claimDueSignals(limit: Int = 100) async throws -> [OutboxItem] {
        let time = now()
        let lease = configuration.claimLease
        let owner = configuration.instanceID
        return try await write { db, _ in
            let rows = try db.query(
                """
                SELECT o.device_id, d.token, d.topic, d.environment, d.alias, o.modseq, o.attempts, d.account_id,
                       a.modseq, d.updated_at
                FROM signal_outbox o JOIN devices d ON d.id = o.device_id JOIN accounts a ON a.id = d.account_id
                WHERE o.due_at <= ? AND o.next_attempt_at <= ? AND o.leased_until <= ?
                ORDER BY o.due_at LIMIT ?\(db.dialect.claimRows(of: "o"))
                """, time, time, time, limit)
            var items: [OutboxItem] = []
            var unreadByAccount: [Int64: Int] = [:]
            for row in rows {
                let account = row[7].int64!
                let unread = try unreadByAccount[account] ?? Self.unreadCount(db, accountID: account)
                unreadByAccount[account] = unread
                try db.run(
                    "UPDATE signal_outbox SET leased_until = ?, leased_by = ? WHERE device_id = ?", time + lease, owner,
                    row[0])
                items.append(
                    OutboxItem(
                        deviceID: row[0].int64!, token: row[1].string!, topic: row[2].string!,
                        environment: APNsEnvironment(rawValue: row[3].string!) ?? .production, alias: row[4].string!,
                        modseq: row[5].int64!, state: self.state(row[8].int64!), unread: unread, attempts: row[6].int!,
                        registeredAt: row[9].double!))
            }
            return items
        }
    }

    /// Marks the signal for `item` as sent, spending one of the device's pacing tokens. The row is deleted only
    /// if it still holds the modseq that was claimed; if changes arrived meanwhile it stays, due at once while the
    /// device has a token left, else when the next returns.
    public func completeSignal(_ item: OutboxItem, sentModseq: Int64) async throws {
        let time = now()
        let pacing = configuration.pacing
        try await write { db, _ in
            let bucket = try db.queryOne("SELECT pace_tokens, pace_at FROM devices WHERE id = ?", item.deviceID)
            let tokens = pacing.spending(
                pacing.tokens(stored: bucket?[0].double, at: bucket?[1].double ?? 0, now: time))
            try db.run(
                """
                UPDATE devices SET last_signal_at = ?, last_signalled_modseq = \(db.dialect.greatest("last_signalled_modseq", "?")),
                    pace_tokens = ?, pace_at = ?
                WHERE id = ?
                """, time, sentModseq, tokens, time, item.deviceID)
            let deleted = try db.run(
                "DELETE FROM signal_outbox WHERE device_id = ? AND modseq <= ?", item.deviceID, sentModseq)
            if deleted == 0 {
                try db.run(
                    """
                    UPDATE signal_outbox
                    SET due_at = ?, next_attempt_at = 0, leased_until = 0, leased_by = NULL, attempts = 0, last_error = NULL
                    WHERE device_id = ?
                    """, pacing.dueTime(tokens: tokens, now: time), item.deviceID)
            }
        }
    }

    /// Puts a failed signal back, to be tried again after `delay` seconds, recording a short error code
    /// (never content).
    public func rescheduleSignal(_ item: OutboxItem, after delay: Double, error: String) async throws {
        let next = now() + delay
        let code = String(error.prefix(64))
        try await write { db, _ in
            try db.run(
                """
                UPDATE signal_outbox
                SET attempts = attempts + 1, next_attempt_at = ?, leased_until = 0, leased_by = NULL, last_error = ?
                WHERE device_id = ?
                """, next, code, item.deviceID)
        }
    }

    /// Ends the leases this process (``Configuration/instanceID``) holds, making those rows claimable again at once;
    /// retry times are kept. For a dispatcher that starts: a lease under its own name belongs to its predecessor,
    /// which stopped or died between claiming and sending. Other processes' leases are theirs: a live peer's is
    /// left alone, a dead peer's runs out (``Configuration/claimLease``) and its rows are claimed by whoever is
    /// left. Returns how many leases it ended.
    @discardableResult
    public func releaseSignalLeases() async throws -> Int {
        let owner = configuration.instanceID
        return try await write { db, _ in
            try db.run(
                "UPDATE signal_outbox SET leased_until = 0, leased_by = NULL WHERE leased_until > 0 AND leased_by = ?",
                owner)
        }
    }

    /// Drops a signal that will never be deliverable (for example a payload the guard refused).
    public func dropSignal(_ item: OutboxItem) async throws {
        try await write { db, _ in try db.run("DELETE FROM signal_outbox WHERE device_id = ?", item.deviceID) }
    }

    /// The earliest time an outbox row becomes claimable, or `nil` when the outbox is empty.
    public func nextSignalDue() async throws -> Double? {
        try await read { db in
            try db.scalar(
                "SELECT min(\(db.dialect.greatest("due_at", "next_attempt_at", "leased_until"))) FROM signal_outbox"
            ).double
        }
    }

    /// Outbox depth, for metrics.
    public func outboxStats() async throws -> OutboxStats {
        try await read { db in
            let row = try db.queryOne(
                "SELECT count(*), coalesce(sum(CASE WHEN attempts > 0 THEN 1 ELSE 0 END), 0) FROM signal_outbox")
            return OutboxStats(depth: row?[0].int ?? 0, retrying: row?[1].int ?? 0)
        }
    }

    /// The last modseq signalled to each of the account's devices, by device token (for tests and drills).
    public func lastSignalledModseqs(accountID: Int64) async throws -> [String: Int64] {
        try await read { db in
            var result: [String: Int64] = [:]
            for row in try db.query(
                "SELECT token, last_signalled_modseq FROM devices WHERE account_id = ?", accountID)
            {
                result[row[0].string!] = row[1].int64!
            }
            return result
        }
    }
}
