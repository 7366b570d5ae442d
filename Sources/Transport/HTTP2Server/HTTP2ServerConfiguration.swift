/// Everything an ``HTTP2Server`` needs to know before it starts.
public struct HTTP2ServerConfiguration: Sendable {
    /// Certificate and key files for HTTP/2 over TLS.
    public struct TLS: Sendable, Hashable {
        /// PEM file with the server certificate followed by any intermediate certificates.
        public var certificateChainPath: String
        /// PEM file with the private key of the server certificate.
        public var privateKeyPath: String

        /// Creates a TLS configuration from PEM file paths.
        public init(certificateChainPath: String, privateKeyPath: String) {
            self.certificateChainPath = certificateChainPath
            self.privateKeyPath = privateKeyPath
        }
    }

    /// A cleartext HTTP/1.1 server that TLS connections choosing HTTP/1.1 are relayed to.
    public struct HTTP1Relay: Sendable, Hashable {
        /// The relay target's address (normally `127.0.0.1`).
        public var host: String
        /// The relay target's port.
        public var port: Int
        /// Whether a TLS client that offers no ALPN at all is relayed too (as a web server would speak HTTP/1.1
        /// to it), instead of being spoken to in HTTP/2 (as Apple's servers do, which aioapns relies on).
        public var includesClientsWithoutALPN: Bool
        /// Whether `h2` is offered at all. `false` makes the listener an HTTP/1.1-only server, as many self-hosted
        /// ones are: `http/1.1` is selected when offered, a client offering only `h2` gets no ALPN answer, and every
        /// connection is relayed.
        public var offersHTTP2: Bool

        /// Creates a relay target.
        public init(
            host: String = "127.0.0.1", port: Int, includesClientsWithoutALPN: Bool = false, offersHTTP2: Bool = true
        ) {
            self.host = host
            self.port = port
            self.includesClientsWithoutALPN = includesClientsWithoutALPN || !offersHTTP2
            self.offersHTTP2 = offersHTTP2
        }
    }

    /// The address to bind: an IP literal (`127.0.0.1`, `::1`, `0.0.0.0`) or a resolvable name.
    public var host: String
    /// The TCP port to bind; `0` picks a free port (read it from ``HTTP2Server/port`` after start).
    public var port: Int
    /// TLS settings; `nil` serves cleartext HTTP/2 with prior knowledge (h2c).
    public var tls: TLS?
    /// The `SETTINGS_MAX_CONCURRENT_STREAMS` value advertised to every client (APNs uses 1000).
    public var maxConcurrentStreams: Int
    /// The largest request body accepted, in bytes. A larger body (or a larger declared
    /// `content-length`) gets a `413` response with the JSON body `{"reason":"PayloadTooLarge"}` as
    /// soon as the limit is crossed; the handler never sees such a request. The rest of the upload is
    /// read and dropped so clients that finish sending before reading (curl) still get the 413; a
    /// client that sends more than 16 MiB beyond that has the stream reset with `NO_ERROR`.
    public var maxRequestBodySize: Int
    /// The per-stream and per-connection receive window advertised to clients, in bytes.
    public var initialWindowSize: Int
    /// A connection with no open stream and no traffic for this long is sent GOAWAY and closed.
    public var idleTimeout: Duration
    /// On shutdown, how long in-flight streams may run after GOAWAY before connections are closed.
    public var shutdownGracePeriod: Duration
    /// Opt-in HTTP/1.1 over TLS: when set (TLS only), a client whose ALPN offers `http/1.1` but not `h2` is
    /// accepted and the decrypted bytes of its connection are relayed, both ways, to this cleartext HTTP/1.1
    /// server. `nil` (the default) refuses such a client during the handshake.
    public var http1Relay: HTTP1Relay?
    /// The source addresses (IP literals) whose connections are served; any other is closed as soon as it is
    /// accepted, before TLS. Empty (the default): every address. A test can so let a service be reached only
    /// through an HTTP proxy whose outgoing connections come from its own address.
    public var allowedPeers: Set<String> = []

    /// Creates a configuration; only the address and TLS choice are required.
    public init(
        host: String = "127.0.0.1",
        port: Int = 0,
        tls: TLS? = nil,
        maxConcurrentStreams: Int = 1000,
        maxRequestBodySize: Int = 1 << 20,
        initialWindowSize: Int = 1 << 20,
        idleTimeout: Duration = .seconds(300),
        shutdownGracePeriod: Duration = .seconds(10),
        http1Relay: HTTP1Relay? = nil
    ) {
        self.host = host
        self.port = port
        self.tls = tls
        self.maxConcurrentStreams = maxConcurrentStreams
        self.maxRequestBodySize = maxRequestBodySize
        self.initialWindowSize = initialWindowSize
        self.idleTimeout = idleTimeout
        self.shutdownGracePeriod = shutdownGracePeriod
        self.http1Relay = http1Relay
    }
}
