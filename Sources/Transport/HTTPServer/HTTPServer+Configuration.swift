import Durations
import Foundation

extension HTTPServer {
    /// Where and how the server listens, and the limits it enforces.
    public struct Configuration: Sendable {
        /// The address to bind: an IPv4/IPv6 literal or a host name (`127.0.0.1`, `0.0.0.0`, `::1`, `localhost`).
        public var host: String
        /// The port to bind; 0 picks a free port (read it back from `HTTPServer.port`).
        public var port: UInt16
        /// TLS certificate and key; `nil` serves plain HTTP.
        public var tls: TLS?
        /// Worker threads polling connections (each with its own epoll set).
        public var threadCount: Int
        /// The most concurrent connections (event streams included). Starting the server raises the
        /// process's soft open-file limit towards its hard limit to fit this many.
        public var connectionLimit: Int
        /// Seconds of inactivity after which a connection (also one stuck mid-request) is closed.
        public var idleTimeoutSeconds: Int
        /// Per-connection memory pool in bytes; it bounds the request line and header size
        /// (larger headers are refused with a 4xx).
        public var connectionMemoryLimit: Int
        /// The largest accepted request body in bytes; larger bodies get 413 `payloadTooLarge`.
        public var maxBodySize: Int
        /// How long a handler may run before the client gets 503 `timeout`.
        public var requestTimeout: Duration
        /// Interval of `: keep-alive` comments on event streams (they also reveal gone clients).
        public var eventStreamHeartbeat: Duration
        /// How long `shutdown()` waits for in-flight requests before answering them with 503.
        public var shutdownGracePeriod: Duration
        /// Called once per finished request; never receives bodies or header values.
        public var accessLog: (@Sendable (AccessLogEntry) -> Void)?
        /// Receives server-side error messages (library diagnostics, handler failures); never request
        /// content. `nil` writes them to standard error.
        public var errorLog: (@Sendable (String) -> Void)?

        /// Creates a configuration; every limit has a production default.
        public init(
            host: String = "127.0.0.1", port: UInt16 = 0, tls: TLS? = nil,
            threadCount: Int = min(4, max(2, ProcessInfo.processInfo.activeProcessorCount)),
            connectionLimit: Int = 10_000, idleTimeoutSeconds: Int = 60,
            connectionMemoryLimit: Int = 32 * 1024, maxBodySize: Int = 1 << 20,
            requestTimeout: Duration = .seconds(30), eventStreamHeartbeat: Duration = .seconds(15),
            shutdownGracePeriod: Duration = .seconds(10),
            accessLog: (@Sendable (AccessLogEntry) -> Void)? = nil,
            errorLog: (@Sendable (String) -> Void)? = nil
        ) {
            self.host = host
            self.port = port
            self.tls = tls
            self.threadCount = threadCount
            self.connectionLimit = connectionLimit
            self.idleTimeoutSeconds = idleTimeoutSeconds
            self.connectionMemoryLimit = connectionMemoryLimit
            self.maxBodySize = maxBodySize
            self.requestTimeout = requestTimeout
            self.eventStreamHeartbeat = eventStreamHeartbeat
            self.shutdownGracePeriod = shutdownGracePeriod
            self.accessLog = accessLog
            self.errorLog = errorLog
        }
    }

    /// PEM files for HTTPS (RSA or P-256 keys; the certificate file may hold the chain), and the oldest TLS
    /// version accepted. Only AEAD ciphers (AES-GCM, ChaCha20-Poly1305) with ECDHE are offered at TLS 1.2.
    public struct TLS: Sendable, Equatable {
        /// Path of the PEM certificate (chain).
        public var certificatePath: String
        /// Path of the PEM private key (unencrypted).
        public var privateKeyPath: String
        /// The oldest protocol version a client may use (TLS 1.2 unless the operator asks for 1.3 only).
        public var minimumVersion: TLSMinimumVersion

        /// Creates a TLS configuration from PEM file paths.
        public init(
            certificatePath: String, privateKeyPath: String, minimumVersion: TLSMinimumVersion = .tls12
        ) {
            self.certificatePath = certificatePath
            self.privateKeyPath = privateKeyPath
            self.minimumVersion = minimumVersion
        }

        /// The GnuTLS priority string libmicrohttpd is given: TLS 1.3 (and 1.2 unless refused), AEAD ciphers
        /// only, ECDHE key exchange over X25519 first — the group most clients send a key share for, so their
        /// handshake needs no HelloRetryRequest round trip — then P-256 and P-384, the server's order.
        var gnuTLSPriorities: String {
            let versions = minimumVersion == .tls13 ? "+VERS-TLS1.3" : "+VERS-TLS1.3:+VERS-TLS1.2"
            return "NORMAL:-VERS-ALL:\(versions):-CIPHER-ALL:+AES-256-GCM:+AES-128-GCM:+CHACHA20-POLY1305:"
                + "-MAC-ALL:+AEAD:-KX-ALL:+ECDHE-ECDSA:+ECDHE-RSA:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:"
                + "+GROUP-SECP384R1:%SERVER_PRECEDENCE"
        }
    }

    /// One line of the access log.
    public struct AccessLogEntry: Sendable, CustomStringConvertible {
        /// The request method.
        public var method: String
        /// The request path without the query string.
        public var path: String
        /// The response status (0 when the client went away before a response was queued).
        public var status: Int
        /// Time from the request line to the end of the response.
        public var duration: Duration
        /// The client's IP address.
        public var remoteAddress: String

        /// `remote method path status duration-ms`.
        public var description: String {
            let ms = duration.seconds * 1000
            return "\(remoteAddress) \(method) \(path) \(status) \(String(format: "%.1f", ms))ms"
        }
    }

    /// Why the server could not start.
    public enum StartError: Error, Sendable, CustomStringConvertible, Equatable {
        /// The host could not be resolved to an address.
        case invalidHost(String)
        /// A TLS file could not be read.
        case unreadableFile(path: String, reason: String)
        /// libmicrohttpd refused to start; the text is its diagnostic (e.g. address in use, bad key).
        case startFailed(String)

        /// A readable explanation.
        public var description: String {
            switch self {
            case .invalidHost(let host): return "cannot resolve listen host '\(host)'"
            case .unreadableFile(let path, let reason): return "cannot read TLS file \(path): \(reason)"
            case .startFailed(let reason): return "HTTP server failed to start: \(reason)"
            }
        }
    }
}

/// The oldest TLS version a listener accepts (`--tls-min-version`).
public enum TLSMinimumVersion: String, Sendable, Equatable, CaseIterable {
    /// TLS 1.2 (AEAD ciphers only) and 1.3.
    case tls12 = "1.2"
    /// TLS 1.3 only.
    case tls13 = "1.3"
}
