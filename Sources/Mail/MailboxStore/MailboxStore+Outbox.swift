import Durations
import Push
import SQLSupport

extension MailboxStore {
    /// Claims up to `limit` due outbox rows: each is leased to this process (``Configuration/instanceID``) and not
    /// claimable again until the lease ends, and comes with the account's state and unread count as they are now.
    /// Where several processes claim at once, each skips the rows another is claiming, so no row goes to two.
    public func claimDueSignals(limit: Int = 100) async throws -> [OutboxItem] {
        let time = clock.secondsSince1970
        let lease = configuration.claimLease
        let owner = configuration.instanceID
        return try await write { db, _ in
            let rows = try db.query(
                """
                SELECT o.device_id, d.service, d.token, d.topic, d.environment, d.push_keys, d.alias, d.signal_key,
                       o.modseq, o.attempts, d.account_id, a.modseq AS account_modseq, d.updated_at,
                       d.last_signalled_modseq
                FROM signal_outbox o JOIN devices d ON d.id = o.device_id JOIN accounts a ON a.id = d.account_id
                WHERE o.due_at <= ? AND o.next_attempt_at <= ? AND o.leased_until <= ?
                ORDER BY o.due_at LIMIT ?\(db.dialect.claimRows(of: "o"))
                """, time, time, time, limit)
            var items: [OutboxItem] = []
            var unreadByAccount: [Int64: Int] = [:]
            for row in rows {
                let account = try row.int64("account_id")
                let unread = try unreadByAccount[account] ?? Self.unreadCount(db, accountID: account)
                unreadByAccount[account] = unread
                let deviceID = try row.int64("device_id")
                try db.run(
                    "UPDATE signal_outbox SET leased_until = ?, leased_by = ? WHERE device_id = ?", time + lease, owner,
                    deviceID)
                items.append(
                    OutboxItem(
                        deviceID: deviceID, address: try Self.address(from: row), alias: try row.string("alias"),
                        signalKey: row["signal_key"].string.flatMap(SignalKey.init(base64URL:)),
                        modseq: try row.int64("modseq"), state: self.state(try row.int64("account_modseq")),
                        unread: unread, attempts: try row.int("attempts"), registeredAt: try row.double("updated_at"),
                        accountID: account, lastSignalledModseq: try row.int64("last_signalled_modseq")))
            }
            return items
        }
    }

    /// Marks the signal for `item` as sent, spending one of the device's pacing tokens. The row is deleted only
    /// if it still holds the modseq that was claimed; if changes arrived meanwhile it stays, due at once while the
    /// device has a token left, else when the next returns.
    public func completeSignal(_ item: OutboxItem, sentModseq: Int64) async throws {
        let time = clock.secondsSince1970
        let pacing = configuration.pacing
        try await write { db, _ in
            let bucket = try db.queryOne("SELECT pace_tokens, pace_at FROM devices WHERE id = ?", item.deviceID)
            let tokens = pacing.spending(
                pacing.tokens(stored: bucket?["pace_tokens"].double, at: bucket?["pace_at"].double ?? 0, now: time))
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

    /// Puts a failed signal back, to be tried again after `delay` seconds, counting the failure and recording a
    /// short error code (never content). The delay is the dispatcher's backoff; a signal held back by a budget is
    /// ``deferSignal(_:after:reason:)``, which is not a failure.
    public func rescheduleSignal(_ item: OutboxItem, after delay: Double, error: String) async throws {
        let next = clock.secondsSince1970 + delay
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

    /// Holds a signal back for `delay` seconds without counting a failure (a background budget spent, a push
    /// service's throttle): its attempts, and so its next backoff, stay as they were.
    public func deferSignal(_ item: OutboxItem, after delay: Double, reason: String) async throws {
        let next = clock.secondsSince1970 + delay
        let code = String(reason.prefix(64))
        try await write { db, _ in
            try db.run(
                """
                UPDATE signal_outbox
                SET next_attempt_at = ?, leased_until = 0, leased_by = NULL, last_error = ?
                WHERE device_id = ?
                """, next, code, item.deviceID)
        }
    }

    /// The failed attempts the device's outbox row has counted, or `nil` when it has no row (for tests).
    public func signalAttempts(deviceID: Int64) async throws -> Int? {
        try await read { db in try db.scalar("SELECT attempts FROM signal_outbox WHERE device_id = ?", deviceID).int }
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
                """
                SELECT count(*) AS depth, coalesce(sum(CASE WHEN attempts > 0 THEN 1 ELSE 0 END), 0) AS retrying
                FROM signal_outbox
                """)
            return OutboxStats(depth: row?["depth"].int ?? 0, retrying: row?["retrying"].int ?? 0)
        }
    }

    /// The outbox by push service: depth, rows retrying, the oldest due time (for the console).
    public func outboxSummaries() async throws -> [OutboxSummary] {
        try await read { db in
            try db.query(
                """
                SELECT d.service, count(*) AS depth, coalesce(sum(CASE WHEN o.attempts > 0 THEN 1 ELSE 0 END), 0)
                       AS retrying, min(o.due_at) AS oldest
                FROM signal_outbox o JOIN devices d ON d.id = o.device_id
                GROUP BY d.service ORDER BY d.service
                """
            ).map { row in
                OutboxSummary(
                    service: try row.string("service"), depth: try row.int("depth"), retrying: try row.int("retrying"),
                    oldestDueAt: row["oldest"].double)
            }
        }
    }

    /// Every device with its account's username, at most `limit`, most recently signalled first (for the
    /// console: no token, address or key).
    public func deviceSummaries(limit: Int = 500) async throws -> [DeviceSummary] {
        try await read { db in
            try db.query(
                """
                SELECT d.alias, a.username, d.service, d.topic, d.environment, d.last_signal_at,
                       d.last_signalled_modseq, d.session_id, d.account_id
                FROM devices d JOIN accounts a ON a.id = d.account_id
                ORDER BY d.last_signal_at DESC, d.id LIMIT ?
                """, limit
            ).map { row in
                DeviceSummary(
                    alias: try row.string("alias"), username: try row.string("username"),
                    service: try row.string("service"), app: try row.string("topic"),
                    environment: try row.string("environment"), lastSignalAt: try row.double("last_signal_at"),
                    lastSignalledModseq: try row.int64("last_signalled_modseq"), sessionID: row["session_id"].int64,
                    accountID: try row.int64("account_id"))
            }
        }
    }

    /// The aliases of the devices registered through a session (for the console, which names a fetch's devices).
    public func deviceAliases(sessionID: Int64) async throws -> [String] {
        try await read { db in
            try db.query("SELECT alias FROM devices WHERE session_id = ? ORDER BY id", sessionID).map {
                try $0.string("alias")
            }
        }
    }

    /// Records this process's report (its name, start, changes and signals so far), replacing its last one.
    public func reportInstance(_ report: InstanceReport) async throws {
        try await write { db, _ in
            try db.run(
                """
                INSERT INTO instances (id, started_at, seen_at, changes, signals_sent, signals_failed)
                VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET started_at = excluded.started_at, seen_at = excluded.seen_at,
                    changes = excluded.changes, signals_sent = excluded.signals_sent,
                    signals_failed = excluded.signals_failed
                """,
                arguments: [
                    report.id, report.startedAt, report.seenAt, report.changes, report.signalsSent,
                    report.signalsFailed,
                ])
        }
    }

    /// Every process that reported within `age` seconds, by name.
    public func instances(seenWithin age: Double) async throws -> [InstanceReport] {
        let since = clock.secondsSince1970 - age
        return try await read { db in
            try db.query(
                """
                SELECT id, started_at, seen_at, changes, signals_sent, signals_failed FROM instances
                WHERE seen_at > ? ORDER BY id
                """, since
            ).map { row in
                InstanceReport(
                    id: try row.string("id"), startedAt: try row.double("started_at"),
                    seenAt: try row.double("seen_at"), changes: try row.int64("changes"),
                    signalsSent: try row.int64("signals_sent"), signalsFailed: try row.int64("signals_failed"))
            }
        }
    }

    /// The username of an account, if it exists.
    public func username(accountID: Int64) async throws -> String? {
        try await read { db in try db.scalar("SELECT username FROM accounts WHERE id = ?", accountID).string }
    }

    /// The last modseq signalled to each of the account's devices, by device address (for tests and drills).
    public func lastSignalledModseqs(accountID: Int64) async throws -> [String: Int64] {
        try await read { db in
            var result: [String: Int64] = [:]
            for row in try db.query(
                "SELECT token, last_signalled_modseq FROM devices WHERE account_id = ?", accountID)
            {
                result[try row.string("token")] = try row.int64("last_signalled_modseq")
            }
            return result
        }
    }
}
