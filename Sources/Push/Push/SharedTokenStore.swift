/// Where the processes sending for one store keep the credentials they must agree on: APNs provider tokens
/// (Apple refuses a key's token replaced more often than every 20 minutes) and OAuth access tokens (one per FCM
/// service account, asked for once per lifetime however many processes send).
public protocol SharedTokenStore: Sendable {
    /// The provider token for the signing key `key`: the stored one while it is younger than `maxAge` (and is not
    /// `stale`, unless `stale` is younger than `minimumAge`), else a new one from `sign` (given the issue time).
    func sharedProviderToken(
        key: String, maxAge: Double, replacing stale: String?, minimumAge: Double,
        sign: @escaping @Sendable (Double) throws -> String
    ) async throws -> (token: String, issuedAt: Double)

    /// The access token stored for `key` when it is valid for at least `minimumValidity` more seconds and is not
    /// `stale` (a token the service refused); otherwise ``AccessTokenClaim/refresh`` to exactly one caller, which
    /// then holds the refresh for `lease` seconds and must ``storeAccessToken(key:token:expiresAt:)``, and
    /// ``AccessTokenClaim/wait`` to the others meanwhile.
    func claimAccessToken(
        key: String, minimumValidity: Double, replacing stale: String?, lease: Double
    ) async throws
        -> AccessTokenClaim

    /// Stores the access token a ``AccessTokenClaim/refresh`` claim fetched, ending the claim.
    func storeAccessToken(key: String, token: String, expiresAt: Double) async throws
}

/// The answer of ``SharedTokenStore/claimAccessToken(key:minimumValidity:replacing:lease:)``.
public enum AccessTokenClaim: Sendable, Equatable {
    /// Use this token until `expiresAt` (seconds since 1970).
    case valid(token: String, expiresAt: Double)
    /// Fetch a new token and store it: this caller holds the refresh.
    case refresh
    /// Another process is fetching one: ask again shortly.
    case wait
}
