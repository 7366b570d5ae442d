import Durations
import OpenSSLCrypto
import Push
import SQLSupport

extension MailboxStore {
    static let deviceColumns =
        "id, handle, service, token, topic, environment, push_keys, alias, signal_key, account_id, updated_at"

    static func device(from row: Row) throws -> DeviceRecord {
        DeviceRecord(
            id: try row.int64("id"), handle: row["handle"].string,
            address: try address(from: row), alias: try row.string("alias"),
            signalKey: row["signal_key"].string.flatMap(SignalKey.init(base64URL:)),
            accountID: try row.int64("account_id"), registeredAt: try row.double("updated_at"))
    }

    /// The device's address from a row holding `service`, `token`, `topic`, `environment` and `push_keys`.
    static func address(from row: Row) throws -> PushAddress {
        PushAddress(
            service: PushServiceName(rawValue: try row.string("service")) ?? .apns, token: try row.string("token"),
            app: try row.string("topic"),
            environment: PushEnvironment(rawValue: try row.string("environment")) ?? .production,
            keys: try row.string("push_keys"))
    }

    /// Registers (or refreshes) a device for the account at `address`, which its push service has checked. A device
    /// is one account's registration of a token: the same token registered by another account is a device of its
    /// own there, and this one is left alone (whoever learns a token cannot take it over and silence its owner).
    /// Every registration gets a fresh signal key, returned in the record and nowhere else. The device is signalled
    /// with the current state right away.
    @discardableResult
    public func registerDevice(
        address: PushAddress, accountID: Int64, sessionID: Int64?
    ) async throws
        -> DeviceRecord
    {
        let token = address.token
        guard !token.isEmpty, token.utf8.count <= 2048,
            token.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7f })
        else { throw MailboxStoreError.invalidArgument("device address") }
        guard address.app.utf8.count <= 255,
            address.app.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7f })
        else { throw MailboxStoreError.invalidArgument("app") }
        guard address.keys.utf8.count <= 255,
            address.keys.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7f })
        else { throw MailboxStoreError.invalidArgument("keys") }
        let registered = clock.secondsSince1970
        let freshAlias = SecureRandom.base64URL(12)
        let key = SignalKey()
        let handle = SecureRandom.base64URL(16)
        let cap = configuration.maximumDevicesPerAccount
        return try await write { db, ledger in
            let existing = try db.scalar(
                "SELECT id FROM devices WHERE account_id = ? AND token = ?", accountID, token
            ).int64
            if let existing {
                // A Web Push subscription's endpoint is bound to the VAPID key it was made for (its `topic`): the
                // same endpoint registered again is the same subscription, still bound to that key, even after a
                // reload replaced the key new ones are made for.
                try db.run(
                    """
                    UPDATE devices SET
                        topic = CASE WHEN service = 'webpush' AND ? = 'webpush' THEN topic ELSE ? END,
                        service = ?, environment = ?, push_keys = ?, session_id = ?,
                        updated_at = ?, signal_key = ?, handle = COALESCE(handle, ?)
                    WHERE id = ?
                    """,
                    arguments: [
                        address.service.rawValue, address.app, address.service.rawValue,
                        address.environment.rawValue, address.keys, sessionID, registered, key.base64URL, handle,
                        existing,
                    ])
            } else {
                guard let count = try db.scalar("SELECT COUNT(*) FROM devices WHERE account_id = ?", accountID).int64,
                    count < cap
                else { throw MailboxStoreError.tooManyDevices }
                try db.run(
                    """
                    INSERT INTO devices (token, service, account_id, session_id, topic, environment, push_keys, alias,
                                         signal_key, handle, created_at, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                    arguments: [
                        token, address.service.rawValue, accountID, sessionID, address.app,
                        address.environment.rawValue, address.keys, freshAlias, key.base64URL, handle, registered,
                        registered,
                    ])
            }
            guard
                let device = try db.queryOne(
                    "SELECT \(Self.deviceColumns) FROM devices WHERE account_id = ? AND token = ?", accountID, token
                ).map(Self.device(from:)),
                let modseq = try db.scalar("SELECT modseq FROM accounts WHERE id = ?", accountID).int64
            else { throw MailboxStoreError.notFound }
            try Self.queueSignal(db, deviceID: device.id, modseq: modseq, dueAt: registered)
            ledger.signalsQueued = true
            return device
        }
    }

    /// Queues a signal of `modseq` for a device: one outbox row per device, holding the newest modseq queued
    /// (coalescing at commit). The one place a signal is queued.
    static func queueSignal(_ db: any SQLConnection, deviceID: Int64, modseq: Int64, dueAt: Double) throws {
        try db.runDeferred(
            """
            INSERT INTO signal_outbox (device_id, modseq, due_at) VALUES (?, ?, ?)
            ON CONFLICT (device_id) DO UPDATE SET modseq = \(db.dialect.greatest("signal_outbox.modseq", "excluded.modseq"))
            """, deviceID, modseq, dueAt)
    }

    /// The account's devices.
    public func devices(accountID: Int64) async throws -> [DeviceRecord] {
        try await read { db in
            try db.query("SELECT \(Self.deviceColumns) FROM devices WHERE account_id = ? ORDER BY id", accountID)
                .map(Self.device(from:))
        }
    }

    /// Deletes the account's device with the API id `handle`, or (for APNs devices, as before devices had ids) the
    /// APNs device token `handle`. Returns whether it existed.
    @discardableResult
    public func deleteDevice(handle: String, accountID: Int64) async throws -> Bool {
        try await write { db, _ in
            if try db.run("DELETE FROM devices WHERE handle = ? AND account_id = ?", handle, accountID) == 1 {
                return true
            }
            return try db.run(
                "DELETE FROM devices WHERE token = ? AND service = 'apns' AND account_id = ?", handle.lowercased(),
                accountID) == 1
        }
    }

    /// Deletes a device its push service reported as gone, unless it was registered again since: with the
    /// service's time of the report (`unregisteredAt`, APNs's 410 timestamp), only when that is later than the
    /// registration; without one, only when the registration is still the one the signal was sent for
    /// (`registeredAt`), so a re-registration during the send survives. Returns whether it was deleted.
    @discardableResult
    public func deleteUnregisteredDevice(id: Int64, registeredAt: Double, unregisteredAt: Double?) async throws -> Bool
    {
        try await write { db, _ in
            if let unregisteredAt {
                return try db.run("DELETE FROM devices WHERE id = ? AND updated_at < ?", id, unregisteredAt) == 1
            }
            return try db.run("DELETE FROM devices WHERE id = ? AND updated_at <= ?", id, registeredAt) == 1
        }
    }
}
