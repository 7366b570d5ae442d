/// Why a request failed, whichever client sent it: HTTPClient (libcurl, HTTP/1.1 and HTTP/2) or HTTP2Client
/// (nghttp2). The cases that only one of them meets say so.
///
/// Messages name hosts, ports and TLS details, never request or response bodies nor header values.
public enum HTTPClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The request or the client's configuration is unusable (a bad URL, path or header); the text says why.
    case invalidRequest(String)
    /// No connection could be made: name resolution failed, or the peer refused or did not answer.
    case connectionFailed(String)
    /// The connection broke while the request was in flight, or the peer answered with something that is not valid
    /// HTTP.
    case connectionLost(String)
    /// HTTP/2: the server sent GOAWAY and did not process the request (HTTP2Client has already retried it once on a
    /// new connection).
    case goAway(errorCode: UInt32)
    /// HTTP/2: the server reset the request's stream with this error code.
    case streamReset(errorCode: UInt32)
    /// The server's certificate is not trusted by the configured CA, or does not match the host name.
    case untrustedCertificate(String)
    /// The server's public key matches none of the configured pins.
    case pinMismatch
    /// The TLS handshake or TLS configuration failed for another reason (bad client certificate, CA file…).
    case tlsFailure(String)
    /// HTTP2Client: the server completed the handshake without selecting `h2` by ALPN, so it does not speak HTTP/2
    /// (an HTTP/1.1-only server). A caller that can speak HTTP/1.1 may go on that way.
    case http2NotOffered
    /// The connect timeout or the request's timeout expired.
    case timeout
    /// The request was abandoned before it finished: the calling task was cancelled, or a streamed response was
    /// dropped.
    case cancelled
    /// The response body grew past the client's `maximumResponseBodySize`.
    case responseTooLarge(limit: Int)
    /// The client was shut down before the request finished.
    case shutdown
    /// HTTPClient: any other libcurl failure, its `CURLcode` and message.
    case curl(code: Int, message: String)

    /// A one-line explanation that is safe to log.
    public var description: String {
        switch self {
        case .invalidRequest(let reason): "invalid request: \(reason)"
        case .connectionFailed(let reason): "connection failed: \(reason)"
        case .connectionLost(let reason): "connection lost: \(reason)"
        case .goAway(let code): "server sent GOAWAY (error code \(code)) before processing the request"
        case .streamReset(let code): "stream reset by the server (error code \(code))"
        case .untrustedCertificate(let reason): "server certificate not trusted: \(reason)"
        case .pinMismatch: "server public key does not match any pinned key"
        case .tlsFailure(let reason): "TLS failure: \(reason)"
        case .http2NotOffered: "the server did not select h2 with ALPN (it does not speak HTTP/2)"
        case .timeout: "request timed out"
        case .cancelled: "request cancelled"
        case .responseTooLarge(let limit): "response body larger than \(limit) bytes"
        case .shutdown: "HTTP client was shut down"
        case .curl(let code, let message): "libcurl error \(code): \(message)"
        }
    }
}
