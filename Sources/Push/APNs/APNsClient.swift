import Durations
import Foundation
import HTTP2Client

/// Sends content-free signals to APNs over one shared, multiplexed HTTP/2 connection.
///
/// Every send runs the ``PayloadGuard`` on the exact bytes it is about to write; a payload that fails is never
/// sent and comes back as ``APNsClientError/payloadRejected(_:)``. Nothing is sent before the server's SETTINGS
/// arrive; then at most ``Configuration/maximumConcurrentStreams`` requests (or the server's
/// `SETTINGS_MAX_CONCURRENT_STREAMS`, when lower) are in flight, and more wait for a free stream. APNs answers
/// 200 with a HEADERS frame that ends the stream; the client reads it as the complete response.
///
/// ```swift
/// let tokens = ProviderTokenManager(signingKey: try APNsSigningKey(p8File: "key.p8", keyID: kid, teamID: team))
/// let client = APNsClient(configuration: .init(endpoint: .sandbox, authentication: .token(tokens)))
/// let signal = try ContentFreeSignal(badge: 3, alias: DeviceAlias(alias), tag: StateTag(tag))
/// let response = try await client.send(
///     APNsNotification(deviceToken: DeviceToken(hex), signal: signal, topic: APNsTopic("com.example.mail")))
/// ```
public final class APNsClient: Sendable {
    /// The configuration the client was created with.
    public let configuration: Configuration
    /// The guard every payload passes before it is sent.
    public let payloadGuard: PayloadGuard
    /// The shared connection: it sends nothing before the server's SETTINGS arrive, then keeps at most
    /// `min(maximumConcurrentStreams, the server's limit)` streams open; further sends wait their turn.
    private let http: HTTP2Client

    /// Creates a client; the connection opens on the first send.
    public init(configuration: Configuration) {
        precondition(configuration.maximumConcurrentStreams > 0, "maximumConcurrentStreams must be positive")
        self.configuration = configuration
        payloadGuard = PayloadGuard(limit: configuration.payloadLimit)
        var tls = HTTP2Client.TLS(caFile: configuration.endpoint.caFile)
        if case .certificate(let certificateFile, let keyFile) = configuration.authentication {
            tls.certificateFile = certificateFile
            tls.keyFile = keyFile
        }
        http = HTTP2Client(
            configuration: HTTP2Client.Configuration(
                baseURL: configuration.endpoint.baseURL, tls: tls, connectTimeout: configuration.connectTimeout,
                requestTimeout: configuration.requestTimeout,
                maximumConcurrentStreams: configuration.maximumConcurrentStreams,
                maximumResponseBodySize: 64 * 1024, proxy: configuration.proxy))
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
        if Task.isCancelled { throw .cancelled }
        var headers: [HTTPField] = []
        headers.reserveCapacity(8)
        var providerToken: ProviderToken?
        var tokenManager: ProviderTokenManager?
        if case .token(let manager) = configuration.authentication {
            do {
                let token = try await manager.token()
                providerToken = token
                tokenManager = manager
                headers.append(HTTPField("authorization", "bearer " + token.value))
            } catch {
                throw .providerToken("signing failed")
            }
        }
        let now = configuration.clock.now()
        headers += notification.headers(now: now)
        headers.append(HTTPField("content-type", "application/json"))

        let request = HTTP2Client.Request(
            method: "POST", path: notification.path, headers: headers, body: payload,
            timeout: configuration.requestTimeout)
        let response: HTTP2Client.Response
        do {
            response = try await http.execute(request)
        } catch .cancelled {
            throw .cancelled
        } catch {
            throw .transport(error)
        }

        if response.status == 200 {
            return APNsResponse(
                apnsID: response[header: "apns-id"] ?? notification.apnsID.lowercasedText,
                uniqueID: response[header: "apns-unique-id"])
        }
        let error = APNsError(
            status: response.status, body: response.body, apnsID: response[header: "apns-id"],
            retryAfter: response[header: "retry-after"], now: now)
        if error.reason == .expiredProviderToken, let tokenManager, let providerToken {
            await tokenManager.invalidate(providerToken)
        }
        throw .rejected(error)
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

    /// The highest number of requests that were in flight at once on the connection.
    public var maximumInFlight: Int { http.maximumStreamsInFlight }

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
