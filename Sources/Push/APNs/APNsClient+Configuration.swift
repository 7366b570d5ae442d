import Durations
import Foundation
import HTTP2Client

extension APNsClient {
    /// Where and how an ``APNsClient`` sends.
    public struct Configuration: Sendable {
        /// The gateway.
        public var endpoint: APNsEndpoint
        /// Token or certificate authentication.
        public var authentication: APNsAuthentication
        /// The most requests in flight at once; keep it at or below the server's
        /// `SETTINGS_MAX_CONCURRENT_STREAMS` (APNs advertises 1000). Extra sends wait their turn.
        public var maximumConcurrentStreams: Int
        /// The payload size limit the guard enforces.
        public var payloadLimit: PayloadGuard.Limit
        /// The time allowed to open the connection (TCP and TLS).
        public var connectTimeout: Duration
        /// The total time allowed for one request, waiting for a stream included.
        public var requestTimeout: Duration
        /// The clock used for `apns-expiration` and `Retry-After` dates.
        public var clock: any WallClock
        /// The HTTP proxy the connection is tunnelled through (`nil`: direct).
        public var proxy: HTTP2Client.Proxy?

        /// Creates a configuration.
        public init(
            endpoint: APNsEndpoint, authentication: APNsAuthentication, maximumConcurrentStreams: Int = 1000,
            payloadLimit: PayloadGuard.Limit = .standard, connectTimeout: Duration = .seconds(10),
            requestTimeout: Duration = .seconds(30), clock: any WallClock = SystemClock(),
            proxy: HTTP2Client.Proxy? = nil
        ) {
            self.endpoint = endpoint
            self.authentication = authentication
            self.maximumConcurrentStreams = maximumConcurrentStreams
            self.payloadLimit = payloadLimit
            self.connectTimeout = connectTimeout
            self.requestTimeout = requestTimeout
            self.clock = clock
            self.proxy = proxy
        }
    }
}
