/// The HTTP version a response was received with.
public enum HTTPVersion: Sendable, Hashable, CustomStringConvertible {
    /// HTTP/1.0.
    case http1_0
    /// HTTP/1.1.
    case http1_1
    /// HTTP/2.
    case http2
    /// HTTP/3.
    case http3
    /// A version libcurl reported that this library does not know.
    case unknown

    /// The version as written in a status line, e.g. `"HTTP/2"`.
    public var description: String {
        switch self {
        case .http1_0: "HTTP/1.0"
        case .http1_1: "HTTP/1.1"
        case .http2: "HTTP/2"
        case .http3: "HTTP/3"
        case .unknown: "HTTP/?"
        }
    }
}

/// Which HTTP version a client asks for.
public enum HTTPVersionPreference: Sendable, Hashable {
    /// HTTP/1.1 only.
    case http1
    /// HTTP/2 negotiated with ALPN over TLS, HTTP/1.1 for `http://` URLs or a server that does not offer `h2`.
    case http2
    /// HTTP/2 without negotiation ("prior knowledge"), the way to speak cleartext HTTP/2 (h2c).
    case http2PriorKnowledge
}
