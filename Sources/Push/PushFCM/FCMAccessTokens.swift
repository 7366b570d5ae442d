import Durations
import Foundation
import HTTP2Client
import Push

/// The OAuth 2.0 access tokens of one service account: an RS256 JWT-bearer assertion exchanged at its token
/// URI, kept until five minutes before it expires, and replaced at once when FCM refuses it (401). With a
/// ``SharedTokenStore`` every process sending for the store uses one token per account: one of them asks the
/// token endpoint, the others wait for what it stores, so the endpoint is asked once per lifetime, not once per
/// process.
actor FCMAccessTokens {
    /// Why no token could be had.
    enum Failure: Error, Equatable {
        /// The token endpoint refused the assertion (`invalid_grant`: a wrong key, an unknown account).
        case refused(String)
        /// The token endpoint could not be reached or answered something else.
        case unavailable(String)
    }

    /// Tokens with less validity left are replaced.
    static let minimumValidity = 300.0

    let account: GoogleServiceAccount
    private let tokenURL: URLComponents
    private let client: HTTP2Client
    private let clock: any WallClock
    private var shared: (any SharedTokenStore)?
    private var cached: (token: String, expiresAt: Double)?
    private var fetching: Task<(token: String, expiresAt: Double), any Error>?

    /// Tokens for `account`, asked for at `tokenURI` (the account's own `token_uri` when `nil`); `clock` dates the
    /// assertions and tells when a token is due.
    init(
        account: GoogleServiceAccount, tokenURI: String?, caFile: String?, proxy: HTTP2Client.Proxy? = nil,
        clock: any WallClock
    ) {
        self.account = account
        self.clock = clock
        let uri = tokenURI ?? account.tokenURI
        tokenURL = URLComponents(string: uri) ?? URLComponents()
        var origin = "\(tokenURL.scheme ?? "https")://\(tokenURL.host ?? "invalid")"
        if let port = tokenURL.port { origin += ":\(port)" }
        client = HTTP2Client(
            configuration: .init(
                baseURL: origin, tls: .init(caFile: caFile), requestTimeout: .seconds(15), proxy: proxy))
    }

    /// The key the account's token is kept under in a shared store.
    var sharedKey: String { "fcm:" + account.clientEmail }

    /// Shares tokens through `store` from now on.
    func share(in store: any SharedTokenStore) { shared = store }

    /// A valid access token, other than `stale` (one FCM just refused).
    func token(replacing stale: String? = nil) async throws -> String {
        let now = clock.secondsSince1970
        if let cached, cached.token != stale, cached.expiresAt - now > Self.minimumValidity { return cached.token }
        if let fetching { return try await fetching.value.token }
        let task = Task { try await self.obtain(replacing: stale ?? cached?.token) }
        fetching = task
        defer { fetching = nil }
        let fresh = try await task.value
        cached = fresh
        return fresh.token
    }

    private func obtain(replacing stale: String?) async throws -> (token: String, expiresAt: Double) {
        guard let shared else { return try await fetch() }
        for _ in 0..<300 {
            switch try await shared.claimAccessToken(
                key: sharedKey, minimumValidity: Self.minimumValidity, replacing: stale, lease: 20)
            {
            case .valid(let token, let expiresAt):
                return (token, expiresAt)
            case .refresh:
                let fresh = try await fetch()
                try await shared.storeAccessToken(key: sharedKey, token: fresh.token, expiresAt: fresh.expiresAt)
                return fresh
            case .wait:
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        throw Failure.unavailable("another process holds the token refresh")
    }

    /// Asks the token endpoint once.
    private func fetch() async throws -> (token: String, expiresAt: Double) {
        let issuedAt = Int64(clock.secondsSince1970)
        let assertion = try account.assertion(audience: account.tokenURI, issuedAt: issuedAt)
        let body = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion
        var path = tokenURL.percentEncodedPath.isEmpty ? "/" : tokenURL.percentEncodedPath
        if let query = tokenURL.percentEncodedQuery { path += "?" + query }
        let response: HTTP2Client.Response
        do {
            response = try await client.execute(
                .init(
                    method: "POST", path: path,
                    headers: [.init("content-type", "application/x-www-form-urlencoded")], body: Array(body.utf8)))
        } catch {
            throw Failure.unavailable("token endpoint: \(error)")
        }
        let object = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
        guard response.status == 200 else {
            let code = (object?["error"] as? String).map { String($0.prefix(64)) } ?? "HTTP \(response.status)"
            if (400..<500).contains(response.status) { throw Failure.refused(code) }
            throw Failure.unavailable(code)
        }
        guard let token = object?["access_token"] as? String, !token.isEmpty,
            let lifetime = (object?["expires_in"] as? NSNumber)?.doubleValue
        else { throw Failure.unavailable("the token endpoint's answer has no access_token or expires_in") }
        return (token, Double(issuedAt) + lifetime)
    }

    /// Closes the connection to the token endpoint.
    nonisolated func shutdown() { client.shutdown() }
}
