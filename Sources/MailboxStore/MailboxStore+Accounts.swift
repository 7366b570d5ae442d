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
        let created = now()
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
                        "INSERT INTO mailboxes (account_id, role, name) VALUES (?, ?, ?)", id, role.rawValue,
                        role.rawValue.capitalized)
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

    /// Stores a new session under the SHA-256 of its bearer token (the token itself is never stored).
    public func createSession(accountID: Int64, tokenHash: [UInt8], deviceName: String) async throws -> SessionRecord {
        guard tokenHash.count == 32 else { throw MailboxStoreError.invalidArgument("token hash") }
        let name = String(deviceName.prefix(100))
        let created = now()
        return try await write { db, _ in
            guard
                let id = try db.scalar(
                    """
                    INSERT INTO sessions (account_id, token_hash, device_name, created_at, last_used_at)
                    VALUES (?, ?, ?, ?, ?) RETURNING id
                    """, accountID, tokenHash, name, created, created
                ).int64
            else { throw MailboxStoreError.notFound }
            return SessionRecord(id: id, accountID: accountID, deviceName: name)
        }
    }

    /// The live session whose token hashes to `tokenHash`, if any.
    public func session(tokenHash: [UInt8]) async throws -> SessionRecord? {
        try await read { db in
            try db.queryOne(
                "SELECT id, account_id, device_name FROM sessions WHERE token_hash = ? AND revoked_at IS NULL",
                tokenHash
            ).map { row in
                SessionRecord(
                    id: try row.int64("id"), accountID: try row.int64("account_id"),
                    deviceName: try row.string("device_name"))
            }
        }
    }

    /// Revokes a session and deletes the devices registered through it. Returns whether it was live.
    @discardableResult
    public func revokeSession(id: Int64, accountID: Int64) async throws -> Bool {
        let revoked = now()
        return try await write { db, _ in
            let changed = try db.run(
                "UPDATE sessions SET revoked_at = ? WHERE id = ? AND account_id = ? AND revoked_at IS NULL", revoked,
                id, accountID)
            try db.run("DELETE FROM devices WHERE session_id = ? AND account_id = ?", id, accountID)
            return changed == 1
        }
    }
}
