/// Which HTTP version a client asks for.
public enum HTTPVersionPreference: Sendable, Hashable {
    /// HTTP/1.1 only.
    case http1
    /// HTTP/2 negotiated with ALPN over TLS, HTTP/1.1 for `http://` URLs or a server that does not offer `h2`.
    case http2
    /// HTTP/2 without negotiation ("prior knowledge"), the way to speak cleartext HTTP/2 (h2c).
    case http2PriorKnowledge
}
