extension HTTPClient {
    /// How an ``HTTPClient`` connects: protocol version, TLS trust, timeouts and connection limits.
    public struct Configuration: Sendable {
        /// The HTTP version to ask for. Defaults to ``HTTPVersionPreference/http2``.
        public var httpVersion: HTTPVersionPreference
        /// Certificate trust, client certificate and key pinning.
        public var tls: TLSConfiguration
        /// The time allowed to establish a connection (TCP and TLS).
        public var connectTimeout: Duration
        /// The default total time allowed for a buffered request; `nil` means no limit.
        /// ``HTTPClient/Request/timeout`` overrides it per request.
        public var requestTimeout: Duration?
        /// The most connections opened to one origin at a time; `nil` picks 1 for HTTP/2 (every request is
        /// multiplexed over one connection) and 6 for HTTP/1.1. `0` means no limit.
        public var maximumConnectionsPerHost: Int?
        /// The most concurrent HTTP/2 streams on one connection (the server's own limit still applies);
        /// `nil` keeps libcurl's default of 100.
        public var maximumConcurrentStreams: Int?
        /// The largest body ``HTTPClient/execute(_:)`` buffers before failing with
        /// ``HTTPClientError/responseTooLarge(limit:)``. Streamed responses have no limit.
        public var maximumResponseBodySize: Int
        /// How long an idle connection may sit in the pool and still be reused.
        public var maximumIdleConnectionAge: Duration
        /// The `User-Agent` header sent when a request has none; `nil` sends none.
        public var userAgent: String?
        /// A proxy URL, or `nil` to connect directly (proxy environment variables are ignored).
        public var proxy: String?
        /// Where to connect instead of a URL's own host and port, in libcurl's `CURLOPT_CONNECT_TO` form
        /// (`HOST:PORT:CONNECT-TO-HOST:CONNECT-TO-PORT`): to reach an address checked beforehand rather than what the
        /// name resolves to when the connection is made. Through a proxy, the tunnel is asked for that address.
        public var connectTo: [String]

        /// Creates a configuration; every parameter has a default suitable for a TLS HTTP/2 service.
        public init(
            httpVersion: HTTPVersionPreference = .http2,
            tls: TLSConfiguration = TLSConfiguration(),
            connectTimeout: Duration = .seconds(10),
            requestTimeout: Duration? = .seconds(60),
            maximumConnectionsPerHost: Int? = nil,
            maximumConcurrentStreams: Int? = nil,
            maximumResponseBodySize: Int = 64 * 1024 * 1024,
            maximumIdleConnectionAge: Duration = .seconds(118),
            userAgent: String? = "SignalFetch-HTTPClient/1",
            proxy: String? = nil,
            connectTo: [String] = []
        ) {
            self.httpVersion = httpVersion
            self.tls = tls
            self.connectTimeout = connectTimeout
            self.requestTimeout = requestTimeout
            self.maximumConnectionsPerHost = maximumConnectionsPerHost
            self.maximumConcurrentStreams = maximumConcurrentStreams
            self.maximumResponseBodySize = maximumResponseBodySize
            self.maximumIdleConnectionAge = maximumIdleConnectionAge
            self.userAgent = userAgent
            self.proxy = proxy
            self.connectTo = connectTo
        }

        var effectiveMaximumConnectionsPerHost: Int {
            if let maximumConnectionsPerHost { return maximumConnectionsPerHost }
            return httpVersion == .http1 ? 6 : 1
        }
    }
}
