/// Why a request failed.
///
/// Messages come from libcurl's error buffer: they name hosts, ports and TLS details, never request or
/// response bodies nor header values.
public enum HTTPClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The request could not be built (for example an unusable URL or header); the text says why.
    case invalidRequest(String)
    /// No connection could be made: name resolution failed, or the peer refused or did not answer.
    case connectionFailed(String)
    /// The connection broke or the peer answered with something that is not valid HTTP.
    case connectionLost(String)
    /// The server's certificate is not trusted by the configured CA, or does not match the host name.
    case untrustedCertificate(String)
    /// The server's public key matches none of the configured pins.
    case pinMismatch
    /// The TLS handshake or TLS configuration failed for another reason (bad client certificate, CA file…).
    case tlsFailure(String)
    /// The connect timeout or the request's total timeout expired.
    case timeout
    /// The transfer was aborted before it finished (a streamed response was cancelled or dropped).
    case cancelled
    /// The buffered response body grew past ``HTTPClient/Configuration/maximumResponseBodySize``.
    case responseTooLarge(limit: Int)
    /// The client was shut down before the request finished.
    case shutdown
    /// Any other libcurl failure: its `CURLcode` and message.
    case curl(code: Int, message: String)

    /// A one-line explanation that is safe to log.
    public var description: String {
        switch self {
        case .invalidRequest(let reason): "invalid request: \(reason)"
        case .connectionFailed(let reason): "connection failed: \(reason)"
        case .connectionLost(let reason): "connection lost: \(reason)"
        case .untrustedCertificate(let reason): "server certificate not trusted: \(reason)"
        case .pinMismatch: "server public key does not match any pinned key"
        case .tlsFailure(let reason): "TLS failure: \(reason)"
        case .timeout: "request timed out"
        case .cancelled: "transfer cancelled"
        case .responseTooLarge(let limit): "response body larger than \(limit) bytes"
        case .shutdown: "HTTP client was shut down"
        case .curl(let code, let message): "libcurl error \(code): \(message)"
        }
    }
}
