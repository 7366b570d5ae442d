import SQLSupport

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
        let time = now()
        return try await write { db, _ in
            try db.run(
                "INSERT INTO provider_tokens (key, token, issued_at) VALUES (?, '', 0) ON CONFLICT (key) DO NOTHING",
                key)
            let row = try db.queryOne(
                "SELECT token, issued_at FROM provider_tokens WHERE key = ?\(db.dialect.lockRows)", key)
            if let token = row?[0].string, let issued = row?[1].double, !token.isEmpty {
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

    /// The times of the events recorded under `key` within the last `window` seconds, oldest first.
    public func recentEvents(_ key: String, within window: Double) async throws -> [Double] {
        let since = now() - window
        return try await read { db in
            try db.query("SELECT at FROM rate_events WHERE key = ? AND at > ? ORDER BY at", key, since).compactMap {
                $0[0].double
            }
        }
    }

    /// Records an event under `key` now, dropping that key's events older than `keep` seconds.
    public func recordEvent(_ key: String, keep: Double) async throws {
        let time = now()
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
        let cutoff = now() - age
        return try await write { db, _ in try db.run("DELETE FROM rate_events WHERE at <= ?", cutoff) }
    }
}
