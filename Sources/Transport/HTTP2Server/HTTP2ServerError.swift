/// Why an ``HTTP2Server`` could not start.
public enum HTTP2ServerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The host could not be resolved to a local address.
    case invalidAddress(host: String, reason: String)
    /// Another socket already listens on the address.
    case addressInUse(host: String, port: Int)
    /// A socket call failed while setting up the listener.
    case socketFailure(operation: String, host: String, port: Int, errno: Int32, reason: String)
    /// The certificate chain file could not be read or used.
    case invalidCertificate(path: String, reason: String)
    /// The private key file could not be read or used.
    case invalidPrivateKey(path: String, reason: String)
    /// The private key does not belong to the certificate.
    case certificateKeyMismatch(certificatePath: String, privateKeyPath: String)
    /// OpenSSL or nghttp2 could not be initialised.
    case setupFailed(reason: String)
    /// A configuration value is out of range.
    case invalidConfiguration(reason: String)
    /// ``HTTP2Server/start()`` was called on a server that is running or was shut down.
    case alreadyStarted

    /// A one-line, human-readable explanation.
    public var description: String {
        switch self {
        case .invalidAddress(let host, let reason):
            return "cannot resolve listen address '\(host)': \(reason)"
        case .addressInUse(let host, let port):
            return "cannot listen on \(host):\(port): address already in use"
        case .socketFailure(let operation, let host, let port, let errno, let reason):
            return "cannot listen on \(host):\(port): \(operation) failed (errno \(errno): \(reason))"
        case .invalidCertificate(let path, let reason):
            return "cannot use TLS certificate chain '\(path)': \(reason)"
        case .invalidPrivateKey(let path, let reason):
            return "cannot use TLS private key '\(path)': \(reason)"
        case .certificateKeyMismatch(let certificatePath, let privateKeyPath):
            return "TLS private key '\(privateKeyPath)' does not match certificate '\(certificatePath)'"
        case .setupFailed(let reason):
            return "HTTP/2 server setup failed: \(reason)"
        case .invalidConfiguration(let reason):
            return "invalid HTTP/2 server configuration: \(reason)"
        case .alreadyStarted:
            return "the HTTP/2 server was already started"
        }
    }
}
