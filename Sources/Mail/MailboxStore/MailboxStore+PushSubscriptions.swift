import Durations
import OpenSSLCrypto
import SQLSupport

/// A JMAP push subscription (RFC 8620 §7.2) as the store keeps it: a push-service URL an account's client chose,
/// the keys its messages are encrypted to (`p256dh.auth`; empty for none), the code sent to the URL to prove it
/// reaches the client, whether the client has sent that code back, the types it wants and when it expires.
public struct PushSubscriptionRecord: Sendable, Equatable {
    /// The subscription's id: 22 random base64url characters.
    public var id: String
    /// The account whose changes it is told of.
    public var accountID: Int64
    /// The session whose access token made it: it ends with that session. `nil`: made with the password.
    public var sessionID: Int64?
    /// The client's own id for the device (at most 255 characters).
    public var deviceClientID: String
    /// The push-service URL.
    public var url: String
    /// The message-encryption keys in the push service's stored form; empty: messages go unencrypted.
    public var keys: String
    /// The code the PushVerification carried.
    public var verificationCode: String
    /// Whether the client has sent the code back: only verified subscriptions are told of changes.
    public var isVerified: Bool
    /// The type names it wants (`nil`: every type).
    public var types: [String]?
    /// When it expires, in seconds since 1970.
    public var expiresAt: Double
}

extension MailboxStore {
    static let pushSubscriptionColumns = pushSubscriptionColumns(of: nil)

    /// The columns ``pushSubscription(from:)`` reads, each qualified by `table` when given.
    static func pushSubscriptionColumns(of table: String?) -> String {
        [
            "id", "account_id", "session_id", "device_client_id", "url", "push_keys", "verification_code", "verified",
            "types", "expires_at",
        ].map { column in table.map { "\($0).\(column)" } ?? column }.joined(separator: ", ")
    }

    static func pushSubscription(from row: Row) throws -> PushSubscriptionRecord {
        PushSubscriptionRecord(
            id: try row.string("id"), accountID: try row.int64("account_id"), sessionID: row["session_id"].int64,
            deviceClientID: try row.string("device_client_id"), url: try row.string("url"),
            keys: try row.string("push_keys"), verificationCode: try row.string("verification_code"),
            isVerified: try row.int64("verified") != 0,
            types: row["types"].string.map { $0.isEmpty ? [] : $0.split(separator: ",").map(String.init) },
            expiresAt: try row.double("expires_at"))
    }

    /// The most push subscriptions one account may hold; past it a creation is refused with `.tooManyDevices`.
    public static let maximumPushSubscriptionsPerAccount = 16

    /// Records a new, unverified push subscription with a fresh id and verification code, made through the
    /// session `sessionID` (`nil`: with the password). The URL and keys are the push service's to check before
    /// this is called.
    public func createPushSubscription(
        accountID: Int64, sessionID: Int64? = nil, deviceClientID: String, url: String, keys: String, types: [String]?,
        expiresAt: Double
    ) async throws -> PushSubscriptionRecord {
        guard (1...255).contains(deviceClientID.utf8.count) else {
            throw MailboxStoreError.invalidArgument("deviceClientId")
        }
        guard (1...2048).contains(url.utf8.count), keys.utf8.count <= 255 else {
            throw MailboxStoreError.invalidArgument("url")
        }
        let record = PushSubscriptionRecord(
            id: SecureRandom.base64URL(16), accountID: accountID, sessionID: sessionID, deviceClientID: deviceClientID,
            url: url,
            keys: keys, verificationCode: SecureRandom.base64URL(16), isVerified: false, types: types,
            expiresAt: expiresAt)
        let created = clock.secondsSince1970
        return try await write { db, _ in
            try db.run("DELETE FROM push_subscriptions WHERE account_id = ? AND expires_at <= ?", accountID, created)
            guard
                let count = try db.scalar("SELECT COUNT(*) FROM push_subscriptions WHERE account_id = ?", accountID)
                    .int64, count < Self.maximumPushSubscriptionsPerAccount
            else { throw MailboxStoreError.tooManyDevices }
            try db.run(
                """
                INSERT INTO push_subscriptions (id, account_id, session_id, device_client_id, url, push_keys,
                                                verification_code, verified, types, expires_at, created_at,
                                                told_modseq)
                VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, (SELECT modseq FROM accounts WHERE id = ?))
                """,
                arguments: [
                    record.id, accountID, sessionID, deviceClientID, url, keys, record.verificationCode,
                    types?.joined(separator: ","), expiresAt, created, accountID,
                ])
            return record
        }
    }

    /// The account's push subscriptions that have not expired, oldest first.
    public func pushSubscriptions(accountID: Int64) async throws -> [PushSubscriptionRecord] {
        let at = clock.secondsSince1970
        return try await read { db in
            try db.query(
                """
                SELECT \(Self.pushSubscriptionColumns) FROM push_subscriptions
                WHERE account_id = ? AND expires_at > ? ORDER BY created_at, id
                """, accountID, at
            ).map(Self.pushSubscription(from:))
        }
    }

    /// Changes what a client may change of its subscription: marks it verified (`verified`), its expiry, its
    /// types (`.some(nil)`: every type). Returns the record as it now is, or `nil` when the account has no such
    /// subscription.
    public func updatePushSubscription(
        id: String, accountID: Int64, verified: Bool? = nil, expiresAt: Double? = nil, types: [String]?? = nil
    ) async throws -> PushSubscriptionRecord? {
        try await write { db, _ in
            guard
                let current = try db.queryOne(
                    "SELECT verified FROM push_subscriptions WHERE id = ? AND account_id = ?", id, accountID)
            else { return nil }
            if let verified {
                _ = try db.run("UPDATE push_subscriptions SET verified = ? WHERE id = ?", verified ? 1 : 0, id)
                if verified, try current.int64("verified") == 0 {
                    // Verified now: told of the account as it is, so the first StateChange is of the next change.
                    _ = try db.run(
                        """
                        UPDATE push_subscriptions SET told_modseq = (SELECT modseq FROM accounts WHERE id = ?)
                        WHERE id = ?
                        """, accountID, id)
                }
            }
            if let expiresAt {
                _ = try db.run("UPDATE push_subscriptions SET expires_at = ? WHERE id = ?", expiresAt, id)
            }
            if let types {
                _ = try db.run(
                    "UPDATE push_subscriptions SET types = ? WHERE id = ?", types?.joined(separator: ","), id)
            }
            return try db.queryOne(
                "SELECT \(Self.pushSubscriptionColumns) FROM push_subscriptions WHERE id = ?", id
            ).map(Self.pushSubscription(from:))
        }
    }

    /// Deletes the account's subscription `id` (its URL and keys go with it). Returns whether it existed.
    @discardableResult
    public func deletePushSubscription(id: String, accountID: Int64) async throws -> Bool {
        try await write { db, _ in
            try db.run("DELETE FROM push_subscriptions WHERE id = ? AND account_id = ?", id, accountID) == 1
        }
    }

    /// The accounts that have a verified subscription that has not expired: who a commit may need to be pushed to.
    public func accountsWithVerifiedPushSubscriptions() async throws -> Set<Int64> {
        let at = clock.secondsSince1970
        return try await read { db in
            Set(
                try db.query(
                    "SELECT DISTINCT account_id FROM push_subscriptions WHERE verified = 1 AND expires_at > ?", at
                ).map { try $0.int64("account_id") })
        }
    }

    /// Deletes every subscription that has expired; returns how many.
    @discardableResult
    public func purgePushSubscriptions() async throws -> Int {
        let at = clock.secondsSince1970
        return try await write { db, _ in try db.run("DELETE FROM push_subscriptions WHERE expires_at <= ?", at) }
    }
}

/// A JMAP push subscription that is owed a StateChange: its account moved past the state it was last told of.
public struct DuePush: Sendable, Equatable {
    /// The subscription.
    public var subscription: PushSubscriptionRecord
    /// The account state it was last told of.
    public var toldModseq: Int64
    /// The failed attempts since it was last told (the next backoff's exponent).
    public var attempts: Int
}

extension MailboxStore {
    /// Claims up to `limit` verified, unexpired subscriptions whose account moved past the state each was last told
    /// of, and whose retry time has come: each is leased to this process (``Configuration/instanceID``) as outbox
    /// rows are, so with several instances each StateChange goes out once.
    public func claimDuePushes(limit: Int = 50) async throws -> [DuePush] {
        let time = clock.secondsSince1970
        let lease = configuration.claimLease
        let owner = configuration.instanceID
        return try await write { db, _ in
            let rows = try db.query(
                """
                SELECT \(Self.pushSubscriptionColumns(of: "s")), s.told_modseq, s.attempts
                FROM push_subscriptions s JOIN accounts a ON a.id = s.account_id
                WHERE s.verified = 1 AND s.told_modseq < a.modseq AND s.expires_at > ? AND s.next_attempt_at <= ?
                      AND s.leased_until <= ?
                ORDER BY s.next_attempt_at LIMIT ?\(db.dialect.claimRows(of: "s"))
                """, time, time, time, limit)
            var due: [DuePush] = []
            for row in rows {
                let subscription = try Self.pushSubscription(from: row)
                try db.run(
                    "UPDATE push_subscriptions SET leased_until = ?, leased_by = ? WHERE id = ?", time + lease, owner,
                    subscription.id)
                due.append(
                    DuePush(
                        subscription: subscription, toldModseq: try row.int64("told_modseq"),
                        attempts: try row.int("attempts")))
            }
            return due
        }
    }

    /// Records that the subscription was told of the account up to `modseq` (its StateChange was delivered, or had
    /// nothing the subscription asked for): its lease and failures end. Only under this process's lease: one that
    /// ran out and was claimed by another instance is that instance's to record. A push sent spends one of the subscription's
    /// pacing tokens (``Configuration/pacing``, as a device's signals do), so a burst of changes is told at once and
    /// a steady stream at the refill rate, each push carrying the newest states.
    public func completePush(id: String, toldModseq modseq: Int64, sent: Bool) async throws {
        let time = clock.secondsSince1970
        let pacing = configuration.pacing
        let owner = configuration.instanceID
        try await write { db, _ in
            let bucket = try db.queryOne("SELECT pace_tokens, pace_at FROM push_subscriptions WHERE id = ?", id)
            var tokens = pacing.tokens(
                stored: bucket?["pace_tokens"].double, at: bucket?["pace_at"].double ?? 0, now: time)
            if sent { tokens = pacing.spending(tokens) }
            try db.run(
                """
                UPDATE push_subscriptions
                SET told_modseq = \(db.dialect.greatest("told_modseq", "?")), attempts = 0, next_attempt_at = ?,
                    leased_until = 0, leased_by = NULL, pace_tokens = ?, pace_at = ?
                WHERE id = ? AND leased_by = ?
                """, modseq, pacing.dueTime(tokens: tokens, now: time), tokens, time, id, owner)
        }
    }

    /// Puts a subscription's failed StateChange back, to be tried again after `delay` seconds (the one backoff),
    /// counting the attempt (the next backoff's exponent).
    public func reschedulePush(id: String, after delay: Double) async throws {
        let next = clock.secondsSince1970 + delay
        let owner = configuration.instanceID
        try await write { db, _ in
            try db.run(
                """
                UPDATE push_subscriptions
                SET attempts = attempts + 1, next_attempt_at = ?, leased_until = 0, leased_by = NULL
                WHERE id = ? AND leased_by = ?
                """, next, id, owner)
        }
    }

    /// How many seconds until the earliest owed push that waits for its time (a retry, a pacing token) is due;
    /// `nil` when none waits.
    public func secondsUntilNextPushDue() async throws -> Double? {
        let time = clock.secondsSince1970
        return try await read { db in
            try db.scalar(
                """
                SELECT min(s.next_attempt_at) FROM push_subscriptions s JOIN accounts a ON a.id = s.account_id
                WHERE s.verified = 1 AND s.told_modseq < a.modseq AND s.expires_at > ? AND s.next_attempt_at > ?
                """, time, time
            ).double.map { $0 - time }
        }
    }

    /// Ends the push leases this process (``Configuration/instanceID``) holds, for a notifier that starts: they are
    /// its predecessor's, which stopped or died between claiming and sending.
    @discardableResult
    public func releasePushLeases() async throws -> Int {
        let owner = configuration.instanceID
        return try await write { db, _ in
            try db.run(
                "UPDATE push_subscriptions SET leased_until = 0, leased_by = NULL WHERE leased_until > 0 AND leased_by = ?",
                owner)
        }
    }
}
