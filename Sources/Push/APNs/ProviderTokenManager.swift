import Durations
import Foundation
import Locking
import OpenSSLCrypto

/// Hands out provider tokens, reusing one until it is due for renewal.
///
/// APNs refuses tokens older than an hour and answers `TooManyProviderTokenUpdates` when a provider changes
/// its token more often than every 20 minutes. So the manager:
/// - reuses the current token while it is younger than ``refreshInterval`` (50 minutes by default);
/// - after ``invalidate(_:)`` (APNs said `ExpiredProviderToken`), makes a new token on the next request, but
///   only if the current one is at least ``minimumRefreshInterval`` (20 minutes) old, or when no such forced
///   refresh happened in the last ``minimumRefreshInterval`` — the one exception right after an expiry;
/// - ignores invalidations of a token that was already replaced, so many requests failing together with the
///   same stale token cause one refresh.
///
/// Processes that sign with the same key must share its token, or each one's first token counts as an update:
/// ``share(through:)`` hands the decision to a store they all use.
public actor ProviderTokenManager {
    /// A store of the key's token shared by several processes: given the longest age a token is used for, a token
    /// APNs refused (or `nil`), the shortest age at which a refused token may be replaced, and a signer (issue time in
    /// seconds → token), it returns the token to use and its issue time, signing a new one only when it must.
    public typealias SharedTokens =
        @Sendable (
            _ maxAge: Double, _ replacing: String?, _ minimumAge: Double,
            _ sign: @escaping @Sendable (Double) throws -> String
        ) async throws -> (token: String, issuedAt: Double)

    private nonisolated let sharing = LockedValue<SharedTokens?>(nil)
    /// The key that signs tokens.
    public nonisolated let signingKey: APNsSigningKey
    /// The age at which a token is replaced on the next request.
    public nonisolated let refreshInterval: Duration
    /// The shortest time between two token changes, except once right after `ExpiredProviderToken`.
    public nonisolated let minimumRefreshInterval: Duration
    private let clock: any WallClock
    private var current: ProviderToken?
    private var invalidated = false
    private var lastForcedRefresh: Date?
    /// How many tokens this manager has signed.
    public private(set) var tokensIssued = 0

    /// Creates a manager reading the time from `clock` (injected so tests can move time).
    public init(
        signingKey: APNsSigningKey, refreshInterval: Duration = .seconds(50 * 60),
        minimumRefreshInterval: Duration = .seconds(20 * 60), clock: any WallClock = SystemClock()
    ) {
        self.signingKey = signingKey
        self.refreshInterval = refreshInterval
        self.minimumRefreshInterval = minimumRefreshInterval
        self.clock = clock
    }

    /// Keeps the key's token in `shared` from now on: every process sharing it signs with one token, and only the
    /// process that finds it due replaces it.
    public nonisolated func share(through shared: @escaping SharedTokens) {
        sharing.withLock { $0 = shared }
    }

    /// The token to send now: the current one, or a new one when it is due (from the shared store, when there is
    /// one).
    public func token() async throws -> ProviderToken {
        let date = clock.now()
        if let current, !invalidated, age(of: current, at: date) < refreshInterval.seconds {
            return current
        }
        if let shared = sharing.withLock({ $0 }) {
            let key = signingKey
            let stale = invalidated ? current?.value : nil
            let (value, issued) = try await shared(refreshInterval.seconds, stale, minimumRefreshInterval.seconds) {
                time in try key.makeToken(issuedAt: Date(timeIntervalSince1970: time)).value
            }
            let token = ProviderToken(value: value, issuedAt: Date(timeIntervalSince1970: issued))
            if token.value != current?.value { tokensIssued += 1 }
            current = token
            invalidated = false
            return token
        }
        let token = try signingKey.makeToken(issuedAt: date)
        current = token
        invalidated = false
        tokensIssued += 1
        tokenIssuedHandler?(token)
        return token
    }

    private var tokenIssuedHandler: (@Sendable (ProviderToken) -> Void)?

    /// Calls `handler` with every token this manager signs, so a provider can keep it across restarts: APNs
    /// refuses a key's token replaced more than once in 20 minutes, and a restart must not count as one.
    public func onTokenIssued(_ handler: @escaping @Sendable (ProviderToken) -> Void) {
        tokenIssuedHandler = handler
    }

    /// Adopts a token signed earlier with this key (restored after a restart), when it is still fresh: it is
    /// used until it is due for refresh, as if this manager had signed it.
    public func adopt(_ token: ProviderToken) {
        let date = clock.now()
        guard age(of: token, at: date) >= 0, age(of: token, at: date) < refreshInterval.seconds,
            let publicKey = try? signingKey.privateKey.publicKey,
            let claims = try? JWT.verifyES256(token.value, key: publicKey),
            claims.keyID == signingKey.keyID, claims.issuer == signingKey.teamID,
            claims.issuedAt == Int64(token.issuedAt.timeIntervalSince1970)
        else { return }
        if let current, current.issuedAt >= token.issuedAt { return }
        current = token
        invalidated = false
    }

    /// Reports that APNs refused `token` as expired. Returns whether the next ``token()`` will be a new one.
    ///
    /// Invalidating a token that has already been replaced does nothing and returns `true` (the caller's retry
    /// will use the newer token).
    @discardableResult
    public func invalidate(_ token: ProviderToken) -> Bool {
        guard let current, current.value == token.value else { return true }
        if invalidated { return true }
        let date = clock.now()
        if age(of: current, at: date) >= minimumRefreshInterval.seconds {
            invalidated = true
        } else if lastForcedRefresh.map({ date.timeIntervalSince($0) >= minimumRefreshInterval.seconds }) ?? true {
            invalidated = true
            lastForcedRefresh = date
        }
        return invalidated
    }

    /// Forgets the current token, so the next ``token()`` signs a new one regardless of the refresh rules
    /// (for a changed key or a restart in tests).
    public func reset() {
        current = nil
        invalidated = false
    }

    private func age(of token: ProviderToken, at date: Date) -> TimeInterval {
        date.timeIntervalSince(token.issuedAt)
    }
}
