import Durations
import Push
import SQLSupport

extension MailboxStore: SharedTokenStore {}

extension MailboxStore {
    /// The provider token every process signs APNs requests with for the signing key named `key`: the stored one
    /// while it is younger than `maxAge` (and is not `stale`, a token APNs refused as expired), else a new one from
    /// `sign` (called with the issue time), stored and returned. One process at a time decides (the row is locked
    /// for the decision), so however many processes ask at once, the key's token changes once.
    ///
    /// A `stale` token younger than `minimumAge` is kept: replacing it would draw `TooManyProviderTokenUpdates`.
    public func sharedProviderToken(
        key: String, maxAge: Double, replacing stale: String?, minimumAge: Double,
        sign: @escaping @Sendable (Double) throws -> String
    ) async throws -> (token: String, issuedAt: Double) {
        let time = clock.secondsSince1970
        return try await write { db, _ in
            try db.run(
                "INSERT INTO provider_tokens (key, token, issued_at) VALUES (?, '', 0) ON CONFLICT (key) DO NOTHING",
                key)
            let row = try db.queryOne(
                "SELECT token, issued_at FROM provider_tokens WHERE key = ?\(db.dialect.lockRows)", key)
            if let token = row?["token"].string, let issued = row?["issued_at"].double, !token.isEmpty {
                let age = time - issued
                let fresh = age >= 0 && age < maxAge
                if fresh && (token != stale || age < minimumAge) { return (token, issued) }
            }
            let issued = time.rounded(.down)  // a JWT's iat is whole seconds
            let token = try sign(issued)
            try db.run("UPDATE provider_tokens SET token = ?, issued_at = ? WHERE key = ?", token, issued, key)
            return (token, issued)
        }
    }

    /// The access token stored under `key` while it stays valid for `minimumValidity` more seconds and is not
    /// `stale`; otherwise the refresh goes to one caller at a time for `lease` seconds (the row is locked for the
    /// decision), and the others wait for the token it stores.
    public func claimAccessToken(
        key: String, minimumValidity: Double, replacing stale: String?, lease: Double
    )
        async throws -> AccessTokenClaim
    {
        let time = clock.secondsSince1970
        return try await write { db, _ in
            try db.run(
                "INSERT INTO access_tokens (key, token, expires_at) VALUES (?, '', 0) ON CONFLICT (key) DO NOTHING", key
            )
            guard
                let row = try db.queryOne(
                    "SELECT token, expires_at, refreshing_until FROM access_tokens WHERE key = ?\(db.dialect.lockRows)",
                    key)
            else { return .refresh }
            let token = try row.string("token")
            let expires = try row.double("expires_at")
            if !token.isEmpty, token != stale, expires - time >= minimumValidity {
                return .valid(token: token, expiresAt: expires)
            }
            if try row.double("refreshing_until") > time { return .wait }
            try db.run("UPDATE access_tokens SET refreshing_until = ? WHERE key = ?", time + lease, key)
            return .refresh
        }
    }

    /// Stores the access token a refresh fetched and ends the refresh.
    public func storeAccessToken(key: String, token: String, expiresAt: Double) async throws {
        try await write { db, _ in
            try db.run(
                """
                INSERT INTO access_tokens (key, token, expires_at, refreshing_until) VALUES (?, ?, ?, 0)
                ON CONFLICT (key) DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at,
                    refreshing_until = 0
                """, key, token, expiresAt)
        }
    }

    /// The times of the events recorded under `key` within the last `window` seconds, oldest first.
    public func recentEvents(_ key: String, within window: Double) async throws -> [Double] {
        let since = clock.secondsSince1970 - window
        return try await read { db in
            try db.query("SELECT at FROM rate_events WHERE key = ? AND at > ? ORDER BY at", key, since).map {
                try $0.double("at")
            }
        }
    }

    /// A sliding-window limit over the events under `key`: `nil` when one more may happen now (fewer than `limit`
    /// within the last `window` seconds), else the seconds until the oldest of them leaves the window.
    public func waitBeforeEvent(_ key: String, limit: Int, within window: Double) async throws -> Double? {
        let time = clock.secondsSince1970
        let recent = try await read { db in
            try db.query(
                "SELECT at FROM rate_events WHERE key = ? AND at > ? ORDER BY at", key, time - window
            ).map { try $0.double("at") }
        }
        guard recent.count >= limit, let oldest = recent.first else { return nil }
        return oldest + window - time
    }

    /// Records an event under `key` now, dropping that key's events older than `keep` seconds.
    public func recordEvent(_ key: String, keep: Double) async throws {
        let time = clock.secondsSince1970
        try await write { db, _ in
            try db.run("DELETE FROM rate_events WHERE key = ? AND at <= ?", key, time - keep)
            try db.run("INSERT INTO rate_events (key, at) VALUES (?, ?)", key, time)
        }
    }

    /// Forgets the events recorded under `key`.
    public func forgetEvents(_ key: String) async throws {
        try await write { db, _ in try db.run("DELETE FROM rate_events WHERE key = ?", key) }
    }

    /// Drops every event older than `age` seconds (housekeeping for keys no longer used). Returns how many.
    @discardableResult
    public func purgeEvents(olderThan age: Double) async throws -> Int {
        let cutoff = clock.secondsSince1970 - age
        return try await write { db, _ in try db.run("DELETE FROM rate_events WHERE at <= ?", cutoff) }
    }
}
