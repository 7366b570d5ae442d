/// Where an ``APNsClient`` sends: Apple's production or sandbox gateway, or a local gateway such as apns-sim.
public struct APNsEndpoint: Sendable, Hashable {
    /// The base URL, scheme, host and port, without a trailing slash (e.g. `https://api.push.apple.com:443`).
    public var baseURL: String
    /// A PEM CA file to trust instead of the system store, or `nil`.
    public var caFile: String?

    /// Creates an endpoint.
    public init(baseURL: String, caFile: String? = nil) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.caFile = caFile
    }

    /// Apple's production gateway, `https://api.push.apple.com:443`.
    public static let production = APNsEndpoint(baseURL: "https://api.push.apple.com:443")
    /// Apple's development gateway, `https://api.sandbox.push.apple.com:443`.
    public static let sandbox = APNsEndpoint(baseURL: "https://api.sandbox.push.apple.com:443")
    /// The production gateway on the alternate port 2197 (for networks that block 443).
    public static let productionAlternatePort = APNsEndpoint(baseURL: "https://api.push.apple.com:2197")
    /// The development gateway on the alternate port 2197.
    public static let sandboxAlternatePort = APNsEndpoint(baseURL: "https://api.sandbox.push.apple.com:2197")

    /// Any gateway: `https://` speaks HTTP/2 over TLS (trusting `caFile` when given); `http://` speaks
    /// cleartext HTTP/2 with prior knowledge (h2c).
    public static func custom(url: String, caFile: String? = nil) -> APNsEndpoint {
        APNsEndpoint(baseURL: url, caFile: caFile)
    }

    /// Whether the endpoint is cleartext h2c.
    public var isCleartext: Bool { baseURL.lowercased().hasPrefix("http://") }
}

/// How the provider proves its identity to APNs.
public enum APNsAuthentication: Sendable {
    /// Token-based: a JWT ES256 in the `authorization` header, from this manager.
    case token(ProviderTokenManager)
    /// Certificate-based: a TLS client certificate (PEM) and its key (PEM, or `nil` when the certificate file
    /// holds it). No `authorization` header is sent.
    case certificate(certificateFile: String, keyFile: String?)
}
