import NetworkAddress

extension HTTP2Client {
    /// A request: method, path (with query), headers and body, sent to the client's origin.
    public struct Request: Sendable {
        /// The method, e.g. `GET` or `POST`.
        public var method: String
        /// The path and query, starting with `/`.
        public var path: String
        /// Header fields (no pseudo-headers, no connection-specific fields).
        public var headers: [HTTPField]
        /// The body; empty sends none.
        public var body: [UInt8]
        /// The time allowed for this request, waiting for a connection and a stream included; `nil` uses
        /// ``Configuration/requestTimeout``.
        public var timeout: Duration?

        /// Creates a request.
        public init(
            method: String = "GET", path: String, headers: [HTTPField] = [], body: [UInt8] = [],
            timeout: Duration? = nil
        ) {
            self.method = method
            self.path = path
            self.headers = headers
            self.body = body
            self.timeout = timeout
        }
    }

    /// A complete response.
    public struct Response: Sendable {
        /// The status code.
        public var status: Int
        /// The header fields, in the order received (names in lowercase).
        public var headers: [HTTPField]
        /// The body.
        public var body: [UInt8]

        /// Creates a response.
        public init(status: Int, headers: [HTTPField] = [], body: [UInt8] = []) {
            self.status = status
            self.headers = headers
            self.body = body
        }

        /// The first value of the header `name` (case-insensitive), or `nil`.
        public subscript(header name: String) -> String? {
            let lowered = name.lowercased()
            return headers.first { $0.name == lowered }?.value
        }
    }

    /// How an ``HTTP2Client`` trusts its server and identifies itself over TLS.
    public struct TLS: Sendable, Equatable {
        /// A PEM file of CA certificates to trust *instead of* the system trust store; `nil` uses the system store.
        public var caFile: String?
        /// A PEM client certificate (chain) to present, or `nil`.
        public var certificateFile: String?
        /// The PEM private key of ``certificateFile``, or `nil` when the certificate file holds it.
        public var keyFile: String?
        /// Accepted server public keys: each is the base64 SHA-256 of a DER `SubjectPublicKeyInfo` (a leading
        /// `sha256//` is allowed). When non-empty, a server whose key matches none fails with
        /// ``HTTPClientError/pinMismatch``; pinning applies in addition to certificate verification.
        public var pinnedPublicKeys: [String]

        /// Creates a TLS configuration; the defaults trust the system store, send no client certificate and
        /// pin nothing.
        public init(
            caFile: String? = nil, certificateFile: String? = nil, keyFile: String? = nil,
            pinnedPublicKeys: [String] = []
        ) {
            self.caFile = caFile
            self.certificateFile = certificateFile
            self.keyFile = keyFile
            self.pinnedPublicKeys = pinnedPublicKeys
        }
    }

    /// Where and how an ``HTTP2Client`` connects.
    public struct Configuration: Sendable {
        /// The origin: `https://host:port` (HTTP/2 over TLS, ALPN `h2`) or `http://host:port` (cleartext h2c with
        /// prior knowledge). The port defaults to 443 or 80.
        public var baseURL: String
        /// Trust and client identity for `https` origins.
        public var tls: TLS
        /// The time allowed to open a connection (TCP, TLS and the server's SETTINGS).
        public var connectTimeout: Duration
        /// The default time allowed for one request.
        public var requestTimeout: Duration
        /// The most streams this client opens at once, below the server's `SETTINGS_MAX_CONCURRENT_STREAMS`
        /// (whichever is lower applies); further requests wait their turn.
        public var maximumConcurrentStreams: Int
        /// Responses with a longer body fail with ``HTTPClientError/responseTooLarge(limit:)``.
        public var maximumResponseBodySize: Int
        /// Which resolved addresses (numeric: `192.0.2.1`, `2001:db8::1`) a connection may be opened to; `nil`
        /// allows every address. Checked on the address actually connected to, after resolution, so a name that
        /// resolves to a refused address (DNS rebinding included) is never connected to; when no address is left
        /// the request fails with ``HTTPClientError/connectionFailed(_:)``.
        public var permitsAddress: (@Sendable (String) -> Bool)?
        /// The proxy connections are tunnelled through, unless it names the origin's host as direct; `nil`: none.
        public var proxy: Proxy?

        /// Creates a configuration.
        public init(
            baseURL: String, tls: TLS = TLS(), connectTimeout: Duration = .seconds(10),
            requestTimeout: Duration = .seconds(30), maximumConcurrentStreams: Int = 1000,
            maximumResponseBodySize: Int = 1 << 20, permitsAddress: (@Sendable (String) -> Bool)? = nil,
            proxy: Proxy? = nil
        ) {
            self.baseURL = baseURL
            self.tls = tls
            self.connectTimeout = connectTimeout
            self.requestTimeout = requestTimeout
            self.maximumConcurrentStreams = maximumConcurrentStreams
            self.maximumResponseBodySize = maximumResponseBodySize
            self.permitsAddress = permitsAddress
            self.proxy = proxy
        }
    }
}

/// The parsed origin of a ``HTTP2Client/Configuration``.
struct Origin: Sendable, Equatable {
    var host: String
    var port: Int
    var isTLS: Bool

    /// The `:authority` value.
    var authority: String {
        let bracketed = host.contains(":") ? "[\(host)]" : host
        let isDefaultPort = (isTLS && port == 443) || (!isTLS && port == 80)
        return isDefaultPort ? bracketed : "\(bracketed):\(port)"
    }

    /// Parses `scheme://host[:port]` (an optional trailing `/` is allowed, nothing else).
    init(url: String) throws(HTTPClientError) {
        let lowered = url.lowercased()
        let rest: Substring
        if lowered.hasPrefix("https://") {
            isTLS = true
            rest = url.dropFirst("https://".count)
        } else if lowered.hasPrefix("http://") {
            isTLS = false
            rest = url.dropFirst("http://".count)
        } else {
            throw .invalidRequest("base URL must start with https:// or http://")
        }
        let hostPort = rest.hasSuffix("/") ? rest.dropLast() : rest
        guard !hostPort.isEmpty, !hostPort.contains("/"), !hostPort.contains("@") else {
            throw .invalidRequest("base URL must be scheme://host[:port]")
        }
        let parts: (host: Substring, port: Substring?)
        do {
            parts = try HostPortSyntax.split(hostPort)
        } catch {
            throw .invalidRequest("base URL has \(error)")
        }
        host = String(parts.host)
        guard !host.isEmpty else { throw .invalidRequest("base URL has no host") }
        if let portText = parts.port {
            guard let port = HostPortSyntax.port(portText) else {
                throw .invalidRequest("base URL has an invalid port")
            }
            self.port = Int(port)
        } else {
            port = isTLS ? 443 : 80
        }
    }
}
