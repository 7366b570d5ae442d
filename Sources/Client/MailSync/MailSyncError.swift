/// Why a transport call, a cache operation or a sync failed.
///
/// Messages name endpoints, status codes and connection problems, never message content or credentials.
public enum MailSyncError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The access token is missing, wrong or revoked (HTTP 401): sync stops until new credentials are given.
    case unauthorized
    /// The server cannot compute changes from the given state (too old or from another store): resync fully.
    case cannotCalculateChanges
    /// The server rejected the given state as malformed: resync fully.
    case invalidState
    /// The message does not exist (HTTP 404).
    case notFound
    /// The server answered with another error status; `code` is its machine code when it sent one.
    /// 429 and 5xx are retried, honouring `retryAfter`.
    case server(status: Int, code: String?, retryAfter: Duration?)
    /// No usable connection: refused, reset, timed out, TLS failure.
    case network(String)
    /// The server's answer could not be understood.
    case invalidResponse(String)
    /// The local cache failed.
    case cache(String)

    /// A short machine-readable code, e.g. `"unauthorized"` or `"network"`.
    public var code: String {
        switch self {
        case .unauthorized: "unauthorized"
        case .cannotCalculateChanges: "cannotCalculateChanges"
        case .invalidState: "invalidState"
        case .notFound: "notFound"
        case .server: "server"
        case .network: "network"
        case .invalidResponse: "invalidResponse"
        case .cache: "cache"
        }
    }

    /// Whether trying again later may succeed: network failures, 429 and 5xx.
    public var isRetryable: Bool {
        switch self {
        case .network: true
        case .server(let status, _, _): status == 429 || status >= 500
        default: false
        }
    }

    /// A one-line explanation that is safe to log.
    public var description: String {
        switch self {
        case .unauthorized: "the server rejected the access token"
        case .cannotCalculateChanges: "the server cannot calculate changes from the local state"
        case .invalidState: "the server rejected the local state as malformed"
        case .notFound: "no such message"
        case .server(let status, let code, _): "server error \(status)" + (code.map { " (\($0))" } ?? "")
        case .network(let reason): "network error: \(reason)"
        case .invalidResponse(let reason): "invalid response: \(reason)"
        case .cache(let reason): "local cache error: \(reason)"
        }
    }
}
