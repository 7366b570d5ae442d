import APNs
import Durations
import Foundation
import Push

/// Sends content-free signals to APNs (or apns-sim) for outbox rows, for every configured app and both
/// environments.
///
/// Each row names its device's topic and environment: the signal goes to that environment's endpoint with that
/// app's topic, kind and provider token. Apps that share a signing key share one ``ProviderTokenManager`` (APNs
/// counts token changes per key), and each (endpoint, key) pair has one multiplexed HTTP/2 connection, opened
/// on first use and closed after ``idleTimeout`` without a send.
///
/// The signal holds only the badge (the unread count now) and/or `content-available`, the device's opaque
/// alias and the tag of the account's state; `APNsClient` runs the payload guard on the serialized bytes before
/// they reach the wire. Each answer is classified once, by `RetryPolicy`, into a ``PushOutcome``; the
/// dispatcher computes the backoff and keeps the retry schedule in the outbox, so it survives restarts.
///
/// Kinds: `badge` (+ `content-available: 1`) is user-visible, push type `alert`, priority 10; `background`
/// (`content-available: 1` only) is push type `background`, priority 5, and throttled by Apple.
public final class APNsPushService: PushService {
    /// One app as the sender routes to it.
    private struct Route: Sendable {
        var topic: APNsTopic
        var kind: PushSignal.Kind
        /// Index into `keys`.
        var key: Int
    }

    /// The collapse id of every signal: a newer signal replaces an older one still waiting for the device.
    static let collapseID = "sync"

    /// The configuration the sender was created with.
    public let configuration: APNsConfiguration
    /// How long a connection may go without a send before it is closed.
    public let idleTimeout: Duration
    private let routes: [String: Route]
    private let keys: [ProviderTokenManager]
    private let pool: APNsConnectionPool
    private let tokenSetup: Task<Void, Never>

    /// Loads every app's signing key; connections open on first use.
    ///
    /// `tokenCacheDirectory` keeps each key's current provider token (`provider-token-KEYID`), so a restart
    /// reuses it instead of signing a new one: APNs refuses a key's token replaced more than once in 20 minutes.
    /// `clock` dates the provider tokens and the `apns-expiration` and `Retry-After` times.
    public init(
        configuration: APNsConfiguration, legacyPayloadLimit: Bool = false, tokenCacheDirectory: String? = nil,
        idleTimeout: Duration = .seconds(600), clock: any WallClock = SystemClock()
    ) throws {
        self.configuration = configuration
        self.idleTimeout = idleTimeout
        let payloadLimit: PayloadGuard.Limit = legacyPayloadLimit ? .legacy : .standard
        var managers: [ProviderTokenManager] = []
        var keyIndex: [String: Int] = [:]
        var routes: [String: Route] = [:]
        var cacheFiles: [(ProviderTokenManager, [String])] = []
        for app in configuration.apps {
            let name = app.signingKeyName
            if keyIndex[name] == nil {
                let key = try APNsSigningKey(p8File: app.keyFile, keyID: app.keyID, teamID: app.teamID)
                let manager = ProviderTokenManager(signingKey: key, clock: clock)
                keyIndex[name] = managers.count
                managers.append(manager)
                if let directory = tokenCacheDirectory {
                    // The second file is where a single-app mailboxd kept its token before.
                    cacheFiles.append(
                        (manager, [Self.tokenFile(directory, keyID: app.keyID), directory + "/provider-token"]))
                }
            }
            routes[app.topic] = Route(topic: try APNsTopic(app.topic), kind: app.signalKind, key: keyIndex[name]!)
        }
        self.routes = routes
        keys = managers
        pool = APNsConnectionPool(idleTimeout: idleTimeout) {
            [configuration, managers, limit = payloadLimit, clock] key in
            APNsClient(
                configuration: .init(
                    endpoint: .custom(url: configuration.endpoint(for: key.environment), caFile: configuration.caFile),
                    authentication: .token(managers[key.key]), payloadLimit: limit, clock: clock,
                    proxy: configuration.proxy))
        }
        tokenSetup = Task {
            for (manager, files) in cacheFiles {
                for file in files.reversed() {
                    if let saved = Self.readToken(file) { await manager.adopt(saved) }  // adopt() checks the key
                }
                let target = files[0]
                await manager.onTokenIssued { token in Self.writeToken(token, to: target) }
            }
        }
    }

    deinit {
        pool.shutdown()
    }

    /// Keeps each signing key's provider token in the store, so every mailboxd instance sharing it signs with one
    /// token and the key's token changes at most once per refresh, however many instances run or restart.
    public func share(in store: any SharedTokenStore) {
        for manager in keys {
            let key = "\(manager.signingKey.teamID).\(manager.signingKey.keyID)"
            manager.share { maxAge, stale, minimumAge, sign in
                try await store.sharedProviderToken(
                    key: key, maxAge: maxAge, replacing: stale, minimumAge: minimumAge, sign: sign)
            }
        }
    }

    static func tokenFile(_ directory: String, keyID: String) -> String { directory + "/provider-token-" + keyID }

    /// Reads a token saved by `writeToken`: the issue time (UNIX seconds) on the first line, the JWT on the second.
    static func readToken(_ path: String) -> ProviderToken? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        let lines = text.split(separator: "\n")
        guard lines.count == 2, let issued = Double(lines[0]) else { return nil }
        return ProviderToken(value: String(lines[1]), issuedAt: Date(timeIntervalSince1970: issued))
    }

    static func writeToken(_ token: ProviderToken, to path: String) {
        let text = "\(Int64(token.issuedAt.timeIntervalSince1970))\n\(token.value)\n"
        let temporary = path + ".tmp"
        guard
            FileManager.default.createFile(
                atPath: temporary, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        else { return }
        rename(temporary, path)  // atomic: a reader sees the old token or the new one, never half of one
    }

    /// `apns`.
    public var name: PushServiceName { .apns }

    /// `token` (64 or more hexadecimal characters), `topic` (an app's bundle id) and `environment`.
    public var registrationFields: Set<String> { ["token", "topic", "environment"] }

    /// Apple throttles background pushes to a few per hour per device.
    public var throttlesBackgroundSignals: Bool { true }

    /// Checks an APNs registration: a hex device token (lower-cased, as APNs tokens are case-insensitive hex), a
    /// topic some app has as its bundle id, and `sandbox` or `production`.
    public func address(for registration: DeviceRegistration) throws(RegistrationError) -> PushAddress {
        let fields = registration.fields
        guard let token = fields["token"].map({ $0.lowercased() }), Self.isValidDeviceToken(token) else {
            throw RegistrationError(
                "invalidArgument", "'token' must be an APNs device token: 64 or more hexadecimal characters.")
        }
        guard let environment = fields["environment"].flatMap(PushEnvironment.init(rawValue:)) else {
            throw RegistrationError("invalidArgument", "'environment' must be 'sandbox' or 'production'.")
        }
        guard let topic = fields["topic"], routes[topic] != nil else {
            throw RegistrationError("unknownTopic", "No app of this server has that topic (bundle id).")
        }
        return PushAddress(service: .apns, token: token, app: topic, environment: environment)
    }

    /// `token`, `topic` and `environment`.
    public func registrationFields(of address: PushAddress) -> [String: String] {
        ["token": address.token, "topic": address.app, "environment": address.environment.rawValue]
    }

    /// Whether `token` looks like an APNs device token: 64 lowercase hex characters (longer even-length hex
    /// strings up to 200 characters are accepted too, as APNs tokens may grow).
    public static func isValidDeviceToken(_ token: String) -> Bool {
        token.utf8.count >= 64 && token.utf8.count <= 200 && token.utf8.count % 2 == 0
            && token.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    /// Whether some app has `topic` as its bundle id.
    public func serves(topic: String) -> Bool { routes[topic] != nil }

    /// The kind of signal the device's app gets.
    public func signalKind(for address: PushAddress) -> PushSignal.Kind? { routes[address.app]?.kind }

    /// Sends `signal` once to its environment's endpoint and classifies the answer.
    public func send(_ signal: PushSignal, to address: PushAddress) async -> PushOutcome {
        await tokenSetup.value
        guard let route = routes[address.app] else { return .defect(reason: "unknownTopic") }
        let notification: APNsNotification
        do {
            notification = try APNsNotification(
                deviceToken: try DeviceToken(address.token), signal: ContentFreeSignal(signal), topic: route.topic,
                expiration: .after(.seconds(3600)), collapseID: try CollapseID(Self.collapseID))
        } catch {
            return .defect(reason: "invalidSignal")
        }
        guard let result = await post(notification, environment: address.environment, key: route.key) else {
            return .retry(reason: "shutdown", retryAfter: nil)
        }
        return Self.outcome(of: result)
    }

    /// What the dispatcher does after `result`: the one classification of an APNs answer.
    static func outcome(of result: Result<APNsResponse, APNsClientError>) -> PushOutcome {
        switch RetryPolicy.classify(result) {
        case .success:
            return .delivered
        case .permanent(let reason, let timestamp):
            return .dropRegistration(reason: reason.rawValue, unregisteredAt: timestamp?.timeIntervalSince1970)
        case .expiredProviderToken:
            return .retry(reason: "ExpiredProviderToken", retryAfter: 0)
        case .retryable(_, let after):
            return .retry(reason: Self.reason(result), retryAfter: after.map(\.seconds))
        case .fatal:
            return .retry(reason: Self.reason(result), retryAfter: nil)
        case .defect(let error):
            if case .payloadRejected = error { return .defect(reason: "payloadGuard") }
            return .defect(reason: Self.reason(result))
        }
    }

    /// Sends `notification` once on the (environment, key) connection; `nil` after ``shutdown()``.
    private func post(
        _ notification: APNsNotification, environment: PushEnvironment, key: Int
    ) async -> Result<APNsResponse, APNsClientError>? {
        let connection = APNsConnectionPool.Key(environment: environment, key: key)
        guard let client = pool.checkOut(connection) else { return nil }
        defer { pool.checkIn(connection) }
        do {
            return .success(try await client.send(notification))
        } catch {
            return .failure(error)
        }
    }

    /// What APNs answered ``check(token:topic:environment:)``.
    public struct CheckResult: Sendable {
        /// The endpoint asked.
        public var endpoint: String
        /// The key id whose token was sent.
        public var keyID: String
        /// The answer: a response, an APNs refusal, or why nothing came back.
        public var result: Result<APNsResponse, APNsClientError>
    }

    /// Sends one background signal (`content-available: 1`, nothing else) to `token` exactly as mailboxd would
    /// signal a device of `topic` in `environment`, to check a configuration against the real gateway. Throws
    /// ``APNsConfigurationError`` for a topic no app serves or a malformed token.
    public func check(token: String, topic: String, environment: PushEnvironment) async throws -> CheckResult {
        guard let route = routes[topic] else {
            throw APNsConfigurationError("no configured app has the topic \(topic)")
        }
        guard let deviceToken = try? DeviceToken(token.lowercased()) else {
            throw APNsConfigurationError("a device token is hexadecimal, usually 64 characters")
        }
        await tokenSetup.value
        let notification = try APNsNotification(
            deviceToken: deviceToken, signal: .background(), topic: route.topic, expiration: .after(.seconds(60)))
        let result = await post(notification, environment: environment, key: route.key)
        return CheckResult(
            endpoint: configuration.endpoint(for: environment), keyID: keys[route.key].signingKey.keyID,
            result: result ?? .failure(.cancelled))
    }

    /// Closes every connection that has had nothing in flight for ``idleTimeout``; returns how many.
    @discardableResult
    func closeIdleConnections(now: ContinuousClock.Instant = .now) -> Int { pool.closeIdleConnections(now: now) }

    /// The connections open now (one per endpoint and signing key in use).
    public var openConnections: Int { pool.openConnections }

    /// The connections opened so far.
    public var connectionsOpened: Int { pool.connectionsOpened }

    /// Closes every connection; later sends are retried by the dispatcher's next start.
    public func shutdown() { pool.shutdown() }

    static func reason(_ result: Result<APNsResponse, APNsClientError>) -> String {
        switch result {
        case .success: return "ok"
        case .failure(.rejected(let refusal)): return refusal.reason.rawValue
        case .failure(.transport): return "transport"
        case .failure(.payloadRejected): return "payloadGuard"
        case .failure(.providerToken): return "providerToken"
        case .failure(.cancelled): return "cancelled"
        }
    }

}
