import OpenSSLCrypto
import SQLSupport

extension MailboxStore {
    static let deviceColumns = "id, token, topic, environment, alias, account_id, updated_at"

    static func device(from row: Row) -> DeviceRecord {
        DeviceRecord(
            id: row[0].int64!, token: row[1].string!, topic: row[2].string!,
            environment: APNsEnvironment(rawValue: row[3].string!) ?? .production, alias: row[4].string!,
            accountID: row[5].int64!, registeredAt: row[6].double!)
    }

    /// Whether `token` looks like an APNs device token: 64 lowercase hex characters (longer even-length hex
    /// strings up to 200 characters are accepted too, as APNs tokens may grow).
    public static func isValidDeviceToken(_ token: String) -> Bool {
        token.utf8.count >= 64 && token.utf8.count <= 200 && token.utf8.count % 2 == 0
            && token.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    /// Registers (or refreshes) a device for the account. A token already registered by another account moves
    /// to this one with a fresh alias. The device is signalled with the current state right away.
    @discardableResult
    public func registerDevice(
        token: String, topic: String, environment: APNsEnvironment, accountID: Int64, sessionID: Int64?
    ) async throws -> DeviceRecord {
        guard Self.isValidDeviceToken(token) else { throw MailboxStoreError.invalidArgument("device token") }
        guard !topic.isEmpty, topic.utf8.count <= 255,
            topic.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value != 0x7f })
        else { throw MailboxStoreError.invalidArgument("topic") }
        let registered = now()
        let freshAlias = SecureRandom.base64URL(12)
        return try await write { db, ledger in
            let existing = try db.queryOne("SELECT \(Self.deviceColumns) FROM devices WHERE token = ?", token)
                .map(Self.device(from:))
            if let existing, existing.accountID == accountID {
                try db.run(
                    "UPDATE devices SET topic = ?, environment = ?, session_id = ?, updated_at = ? WHERE id = ?", topic,
                    environment.rawValue, sessionID, registered, existing.id)
            } else if let existing {
                try db.run("DELETE FROM signal_outbox WHERE device_id = ?", existing.id)
                try db.run(
                    """
                    UPDATE devices SET account_id = ?, session_id = ?, topic = ?, environment = ?, alias = ?,
                        updated_at = ?, last_signal_at = 0, last_signalled_modseq = 0
                    WHERE id = ?
                    """,
                    arguments: [
                        accountID, sessionID, topic, environment.rawValue, freshAlias, registered, existing.id,
                    ])
            } else {
                try db.run(
                    """
                    INSERT INTO devices (token, account_id, session_id, topic, environment, alias, created_at,
                                         updated_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                    arguments: [
                        token, accountID, sessionID, topic, environment.rawValue, freshAlias, registered, registered,
                    ])
            }
            guard
                let device = try db.queryOne("SELECT \(Self.deviceColumns) FROM devices WHERE token = ?", token)
                    .map(Self.device(from:)),
                let modseq = try db.scalar("SELECT modseq FROM accounts WHERE id = ?", accountID).int64
            else { throw MailboxStoreError.notFound }
            try db.run(
                """
                INSERT INTO signal_outbox (device_id, modseq, due_at) VALUES (?, ?, ?)
                ON CONFLICT (device_id) DO UPDATE SET modseq = \(db.dialect.greatest("signal_outbox.modseq", "excluded.modseq"))
                """, device.id, modseq, registered)
            ledger.signalsQueued = true
            return device
        }
    }

    /// The account's devices.
    public func devices(accountID: Int64) async throws -> [DeviceRecord] {
        try await read { db in
            try db.query("SELECT \(Self.deviceColumns) FROM devices WHERE account_id = ? ORDER BY id", accountID)
                .map(Self.device(from:))
        }
    }

    /// Deletes the account's device with `token`. Returns whether it existed.
    @discardableResult
    public func deleteDevice(token: String, accountID: Int64) async throws -> Bool {
        try await write { db, _ in
            try db.run("DELETE FROM devices WHERE token = ? AND account_id = ?", token, accountID) == 1
        }
    }

    /// Deletes a device APNs reported as unregistered, but only when APNs stopped accepting the token after the
    /// device was last registered (a 410 timestamp older than the registration is stale). Returns whether it
    /// was deleted.
    @discardableResult
    public func deleteUnregisteredDevice(id: Int64, unregisteredAt: Double?) async throws -> Bool {
        try await write { db, _ in
            if let unregisteredAt {
                return try db.run("DELETE FROM devices WHERE id = ? AND updated_at < ?", id, unregisteredAt) == 1
            }
            return try db.run("DELETE FROM devices WHERE id = ?", id) == 1
        }
    }
}
