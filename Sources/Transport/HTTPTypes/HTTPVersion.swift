/// An HTTP version: the one a response was received with, or a connection speaks.
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
