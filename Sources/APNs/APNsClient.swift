import Foundation
import HTTPClient
import Synchronization

/// Sends content-free signals to APNs over one shared, multiplexed HTTP/2 connection.
///
/// Every send runs the ``PayloadGuard`` on the exact bytes it is about to write; a payload that fails is never
/// sent and comes back as ``APNsClientError/payloadRejected(_:)``. At most
/// ``Configuration/maximumConcurrentStreams`` requests are in flight; more wait for a free slot.
///
/// ```swift
/// let tokens = ProviderTokenManager(signingKey: try APNsSigningKey(p8File: "key.p8", keyID: kid, teamID: team))
/// let client = APNsClient(configuration: .init(endpoint: .sandbox, authentication: .token(tokens)))
/// let signal = try ContentFreeSignal(badge: 3, alias: DeviceAlias(alias), state: SyncState(state))
/// let response = try await client.send(
///     APNsNotification(deviceToken: DeviceToken(hex), signal: signal, topic: APNsTopic("com.example.mail")))
/// ```
public final class APNsClient: Sendable {
    /// The configuration the client was created with.
    public let configuration: Configuration
    /// The guard every payload passes before it is sent.
    public let payloadGuard: PayloadGuard
    private let http: HTTPClient
    private let slots: AsyncSemaphore
    /// Lets one request through at a time until a response has come back on the connection, so the server's
    /// SETTINGS (its stream limit) are known before requests are multiplexed; reset by transport failures.
    private let warmUp = AsyncSemaphore(limit: 1)
    private let connectionIsWarm = Mutex(false)

    /// Creates a client; the connection opens on the first send.
    public init(configuration: Configuration) {
        precondition(configuration.maximumConcurrentStreams > 0, "maximumConcurrentStreams must be positive")
        self.configuration = configuration
        payloadGuard = PayloadGuard(limit: configuration.payloadLimit)
        slots = AsyncSemaphore(limit: configuration.maximumConcurrentStreams)
        var tls = TLSConfiguration(caFile: configuration.endpoint.caFile)
        if case .certificate(let certificateFile, let keyFile) = configuration.authentication {
            tls.clientCertificateFile = certificateFile
            tls.clientKeyFile = keyFile
        }
        http = HTTPClient(
            configuration: HTTPClient.Configuration(
                httpVersion: configuration.endpoint.httpVersion, tls: tls,
                connectTimeout: configuration.connectTimeout, requestTimeout: configuration.requestTimeout,
                maximumConnectionsPerHost: 1, maximumConcurrentStreams: configuration.maximumConcurrentStreams,
                maximumResponseBodySize: 64 * 1024, userAgent: nil))
    }

    deinit {
        http.shutdown()
    }

    /// Sends one notification (a single attempt).
    ///
    /// Returns when APNs accepted it (200). Throws ``APNsClientError``: `.rejected` for an APNs error status,
    /// `.payloadRejected` when the guard refused the payload (nothing was sent), `.transport` for connection
    /// failures, GOAWAY and timeouts. After `ExpiredProviderToken` the token is already invalidated, so the
    /// next send carries a new one (within the ``ProviderTokenManager`` rules).
    public func send(_ notification: APNsNotification) async throws(APNsClientError) -> APNsResponse {
        let payload = notification.signal.payload
        try checkPayload(payload)
        return try await send(payloadAfterGuard: payload, notification: notification)
    }

    /// Runs the payload guard on `payload`; throws ``APNsClientError/payloadRejected(_:)``.
    func checkPayload(_ payload: [UInt8]) throws(APNsClientError) {
        do {
            try payloadGuard.inspect(payload)
        } catch {
            throw .payloadRejected(error)
        }
    }

    /// Sends `payload` for `notification`'s headers; the payload must already have passed the guard.
    func send(
        payloadAfterGuard payload: [UInt8], notification: APNsNotification
    ) async throws(APNsClientError) -> APNsResponse {
        await slots.acquire()
        defer { slots.release() }
        if Task.isCancelled { throw .cancelled }

        var headers = HTTPHeaders()
        var providerToken: ProviderToken?
        var tokenManager: ProviderTokenManager?
        if case .token(let manager) = configuration.authentication {
            do {
                let token = try await manager.token()
                providerToken = token
                tokenManager = manager
                headers.add(name: "authorization", value: "bearer " + token.value)
            } catch {
                throw .providerToken("signing failed")
            }
        }
        let now = configuration.now()
        for field in notification.headers(now: now) { headers.add(name: field.name, value: field.value) }
        headers.add(name: "content-type", value: "application/json")

        let request = HTTPRequest(
            method: .post, url: configuration.endpoint.baseURL + notification.path, headers: headers,
            body: Data(payload), timeout: configuration.requestTimeout)
        let response = try await execute(request)

        if response.status == 200 {
            return APNsResponse(
                apnsID: response.headers["apns-id"] ?? notification.apnsID.uuidString.lowercased(),
                uniqueID: response.headers["apns-unique-id"])
        }
        let error = APNsError(
            status: response.status, body: response.body, apnsID: response.headers["apns-id"],
            retryAfter: response.headers["retry-after"], now: now)
        if error.reason == .expiredProviderToken, let tokenManager, let providerToken {
            await tokenManager.invalidate(providerToken)
        }
        throw .rejected(error)
    }

    /// Runs `request`; while the connection is not known to be up, requests go one at a time.
    private func execute(_ request: HTTPRequest) async throws(APNsClientError) -> HTTPResponse {
        var holdsWarmUp = false
        if !connectionIsWarm.withLock({ $0 }) {
            await warmUp.acquire()
            if connectionIsWarm.withLock({ $0 }) {
                warmUp.release()
            } else {
                holdsWarmUp = true
            }
        }
        defer { if holdsWarmUp { warmUp.release() } }
        do {
            let response = try await http.execute(request)
            if holdsWarmUp { connectionIsWarm.withLock { $0 = true } }
            return response
        } catch let error as HTTPClientError {
            connectionIsWarm.withLock { $0 = false }
            throw .transport(error)
        } catch {
            throw .cancelled
        }
    }

    /// Sends `notification`, retrying as `retry` decides (sleeping between attempts), and returns the final
    /// action: ``RetryAction/done``, ``RetryAction/dropRegistration(reason:timestamp:)``,
    /// ``RetryAction/discard(_:)`` or ``RetryAction/giveUp(_:)``.
    public func deliver(
        _ notification: APNsNotification, retry: RetryPolicy.Configuration = RetryPolicy.Configuration()
    ) async -> APNsDeliveryReport {
        var policy = RetryPolicy(configuration: retry)
        var generator = SystemRandomNumberGenerator()
        var lastResponse: APNsResponse?
        while true {
            let result: Result<APNsResponse, APNsClientError>
            do {
                let response = try await send(notification)
                lastResponse = response
                result = .success(response)
            } catch {
                result = .failure(error)
            }
            let action = policy.next(after: result, using: &generator)
            switch action {
            case .refreshTokenAndRetry:
                continue
            case .retry(let delay):
                do {
                    try await Task.sleep(for: delay)
                } catch {
                    return APNsDeliveryReport(action: .giveUp(.cancelled), attempts: policy.attempts, response: nil)
                }
            default:
                return APNsDeliveryReport(action: action, attempts: policy.attempts, response: lastResponse)
            }
        }
    }

    /// The number of connections opened to the gateway so far (1 while the shared connection holds).
    public var connectionsOpened: Int { http.connectionsOpened }

    /// The highest number of requests that were in flight at once.
    public var maximumInFlight: Int { slots.maximumInUse }

    /// Closes the connection; later sends fail with `.transport(.shutdown)`.
    public func shutdown() {
        http.shutdown()
    }
}

/// The outcome of ``APNsClient/deliver(_:retry:)``.
public struct APNsDeliveryReport: Sendable, Equatable {
    /// The final action: `.done`, `.dropRegistration`, `.discard` or `.giveUp`.
    public var action: RetryAction
    /// How many attempts were made.
    public var attempts: Int
    /// The APNs response when delivered.
    public var response: APNsResponse?

    /// Creates a report.
    public init(action: RetryAction, attempts: Int, response: APNsResponse?) {
        self.action = action
        self.attempts = attempts
        self.response = response
    }
}
