import Durations
import Foundation
import OpenSSLCrypto
import SQLSupport

extension MailboxStore {
    /// The longest accepted username.
    public static let maximumUsernameLength = 254

    /// Creates an account with its inbox, archive and trash. Usernames are case-insensitive and stored lowercased.
    @discardableResult
    public func createAccount(username: String, password: String) async throws -> Account {
        let name = username.trimmingCharacters(in: .whitespaces).lowercased()
        guard !name.isEmpty, name.utf8.count <= Self.maximumUsernameLength,
            name.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7f })
        else { throw MailboxStoreError.invalidArgument("username") }
        guard password.utf8.count >= 8, password.utf8.count <= 1024 else {
            throw MailboxStoreError.invalidArgument("password (8 to 1024 bytes)")
        }
        let hash = try await passwordHashing.run { [parameters = configuration.passwordParameters] in
            try PasswordHash.hash(password, parameters: parameters)
        }
        let created = clock.secondsSince1970
        do {
            return try await write { db, _ in
                guard
                    let id = try db.scalar(
                        "INSERT INTO accounts (username, password_hash, created_at) VALUES (?, ?, ?) RETURNING id",
                        name,
                        hash, created
                    ).int64
                else { throw MailboxStoreError.notFound }
                for role in MailboxRole.allCases {
                    try db.run(
                        "INSERT INTO mailboxes (account_id, public_id, role, name) VALUES (?, ?, ?, ?)", id,
                        role.rawValue, role.rawValue, role.rawValue.capitalized)
                }
                return Account(id: id, username: name, modseq: 0)
            }
        } catch MailboxStoreError.storage(let failure) where failure.kind == .uniqueViolation {
            throw MailboxStoreError.usernameTaken
        }
    }

    /// An account from a row holding `id`, `username` and `modseq`.
    static func account(from row: Row) throws -> Account {
        Account(id: try row.int64("id"), username: try row.string("username"), modseq: try row.int64("modseq"))
    }

    /// Every account, by username.
    public func accounts() async throws -> [Account] {
        try await read { db in
            try db.query("SELECT id, username, modseq FROM accounts ORDER BY username").map(Self.account(from:))
        }
    }

    /// The account with `username`, if any.
    public func account(username: String) async throws -> Account? {
        try await read { db in
            try db.queryOne(
                "SELECT id, username, modseq FROM accounts WHERE username = ?", username.lowercased()
            ).map(Self.account(from:))
        }
    }

    /// The account with this id, if any.
    public func account(id: Int64) async throws -> Account? {
        try await read { db in
            try db.queryOne("SELECT id, username, modseq FROM accounts WHERE id = ?", id).map(Self.account(from:))
        }
    }

    /// Checks a username and password. Returns the account id, or `nil` — in the same time whether the username
    /// does not exist or the password is wrong (an unknown username is checked against a decoy hash).
    public func authenticate(username: String, password: String) async throws -> Int64? {
        let row = try await read { db in
            try db.queryOne("SELECT id, password_hash FROM accounts WHERE username = ?", username.lowercased())
        }
        let hash = row?["password_hash"].string ?? decoyPasswordHash
        let matches = try await passwordHashing.run { PasswordHash.verify(password, against: hash) }
        guard let row, matches else { return nil }
        return row["id"].int64
    }

    /// Stores a new session under the SHA-256 of its bearer token (the token itself is never stored). When the
    /// account then has more live sessions than ``Configuration/maximumSessionsPerAccount``, the least recently
    /// used ones end (with their devices, as at sign-out).
    public func createSession(accountID: Int64, tokenHash: [UInt8], deviceName: String) async throws -> SessionRecord {
        guard tokenHash.count == 32 else { throw MailboxStoreError.invalidArgument("token hash") }
        let name = String(deviceName.prefix(100))
        let created = clock.secondsSince1970
        let cap = configuration.maximumSessionsPerAccount
        let (idleSince, createdSince) = liveSessionBounds(now: created)
        return try await write { db, _ in
            guard
                let id = try db.scalar(
                    """
                    INSERT INTO sessions (account_id, token_hash, device_name, created_at, last_used_at)
                    VALUES (?, ?, ?, ?, ?) RETURNING id
                    """, accountID, tokenHash, name, created, created
                ).int64
            else { throw MailboxStoreError.notFound }
            let live = try db.query(
                """
                SELECT id FROM sessions
                WHERE account_id = ? AND revoked_at IS NULL AND last_used_at > ? AND created_at > ?
                ORDER BY last_used_at DESC, id DESC
                """, accountID, idleSince, createdSince
            ).map { try $0.int64("id") }
            for ended in live.dropFirst(cap) where ended != id {
                try Self.endSession(db, id: ended, accountID: accountID, at: created)
            }
            return SessionRecord(
                id: id, accountID: accountID, deviceName: name, createdAt: created, lastUsedAt: created)
        }
    }

    /// The oldest last use and the oldest start a live session can have at `now`.
    func liveSessionBounds(now: Double) -> (idleSince: Double, createdSince: Double) {
        (now - configuration.sessionIdleTimeout, now - configuration.sessionLifetime)
    }

    /// The live session whose token hashes to `tokenHash`, if any: not revoked, used within the idle timeout and
    /// younger than the lifetime. Its last use is written when the one on record is more than a tenth of the idle
    /// timeout (at most an hour) old, so most requests only read.
    public func session(tokenHash: [UInt8]) async throws -> SessionRecord? {
        let time = clock.secondsSince1970
        let (idleSince, createdSince) = liveSessionBounds(now: time)
        let found = try await read { db in
            try db.queryOne(
                """
                SELECT id, account_id, device_name, created_at, last_used_at FROM sessions
                WHERE token_hash = ? AND revoked_at IS NULL AND last_used_at > ? AND created_at > ?
                """, tokenHash, idleSince, createdSince
            ).map { row in
                SessionRecord(
                    id: try row.int64("id"), accountID: try row.int64("account_id"),
                    deviceName: try row.string("device_name"), createdAt: try row.double("created_at"),
                    lastUsedAt: try row.double("last_used_at"))
            }
        }
        guard var session = found else { return nil }
        if time - session.lastUsedAt > min(3600, configuration.sessionIdleTimeout / 10) {
            let id = session.id
            try await write { db, _ in
                try db.run("UPDATE sessions SET last_used_at = ? WHERE id = ? AND last_used_at < ?", time, id, time)
            }
            session.lastUsedAt = time
        }
        return session
    }

    /// Whether session `id` of the account still lives: not revoked, used within the idle timeout and younger than
    /// the lifetime. A yes counts as a use (as ``session(tokenHash:)`` does): a socket held open with the session's
    /// token keeps it from going idle.
    public func sessionLives(id: Int64, accountID: Int64) async throws -> Bool {
        let time = clock.secondsSince1970
        let (idleSince, createdSince) = liveSessionBounds(now: time)
        let lastUsed = try await read { db in
            try db.scalar(
                """
                SELECT last_used_at FROM sessions
                WHERE id = ? AND account_id = ? AND revoked_at IS NULL AND last_used_at > ? AND created_at > ?
                """, id, accountID, idleSince, createdSince
            ).double
        }
        guard let lastUsed else { return false }
        if time - lastUsed > min(3600, configuration.sessionIdleTimeout / 10) {
            try await write { db, _ in
                try db.run("UPDATE sessions SET last_used_at = ? WHERE id = ? AND last_used_at < ?", time, id, time)
            }
        }
        return true
    }

    /// Ends a session and deletes the devices registered and the push subscriptions made through it. Returns
    /// whether it had not ended before.
    @discardableResult
    static func endSession(_ db: any SQLConnection, id: Int64, accountID: Int64, at time: Double) throws -> Bool {
        let changed = try db.run(
            "UPDATE sessions SET revoked_at = ? WHERE id = ? AND account_id = ? AND revoked_at IS NULL", time, id,
            accountID)
        try db.run("DELETE FROM devices WHERE session_id = ? AND account_id = ?", id, accountID)
        try db.run("DELETE FROM push_subscriptions WHERE session_id = ? AND account_id = ?", id, accountID)
        return changed == 1
    }

    /// Revokes a session and deletes the devices registered through it. Returns whether it was live.
    @discardableResult
    public func revokeSession(id: Int64, accountID: Int64) async throws -> Bool {
        let revoked = clock.secondsSince1970
        return try await write { db, _ in try Self.endSession(db, id: id, accountID: accountID, at: revoked) }
    }

    /// Signs the account out everywhere: revokes every session and deletes every device and push subscription (none
    /// is signalled again until it signs in and registers). Returns how many sessions were live.
    @discardableResult
    public func revokeAllSessions(accountID: Int64) async throws -> Int {
        let revoked = clock.secondsSince1970
        return try await write { db, _ in
            let ended = try db.run(
                "UPDATE sessions SET revoked_at = ? WHERE account_id = ? AND revoked_at IS NULL", revoked, accountID)
            try db.run("DELETE FROM devices WHERE account_id = ?", accountID)
            try db.run("DELETE FROM push_subscriptions WHERE account_id = ?", accountID)
            return ended
        }
    }

    /// Deletes sessions that are over (revoked, idle or too old) since `age` seconds or more; their devices stay
    /// (a device whose session expired is still signalled, and its app asks its user to sign in), their JMAP push
    /// subscriptions go with them (RFC 8620 §7.2: they end with the credentials that made them). Housekeeping.
    @discardableResult
    public func purgeSessions(olderThan age: Double) async throws -> Int {
        let time = clock.secondsSince1970
        let (idleSince, createdSince) = liveSessionBounds(now: time - age)
        return try await write { db, _ in
            try db.run(
                "DELETE FROM sessions WHERE revoked_at <= ? OR last_used_at <= ? OR created_at <= ?", time - age,
                idleSince, createdSince)
        }
    }
}
