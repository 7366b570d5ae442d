import ConnectionLoop
import Foundation
import Locking

/// Why the IMAP listener could not start.
public struct IMAPServerError: Error, CustomStringConvertible {
    /// What failed.
    public let description: String
}

/// The IMAP listener: ``IMAPSession`` on a ``ConnectionLoop`` (one thread, epoll, TLS in memory), implicit TLS
/// (RFC 8314) unless the development plain-text mode is asked for.
public final class IMAPServer: Sendable {
    /// Where to listen, the TLS files and the limits.
    public struct Configuration: Sendable {
        /// The address to bind.
        public var host: String
        /// The port (0 picks one).
        public var port: UInt16
        /// The certificate chain and key (PEM); `nil` for plain text (development only: logins are disabled).
        public var tls: (certificate: String, privateKey: String)?
        /// `"1.2"` or `"1.3"`.
        public var minimumTLSVersion: String
        /// The most simultaneous connections.
        public var maxConnections: Int
        /// The session's limits.
        public var session: IMAPSession.Configuration
        /// The most bytes of message summaries FETCH keeps for all connections (``IMAPFetchCache``; 0: none).
        public var fetchCacheBytes: Int

        /// Creates a configuration.
        public init(
            host: String, port: UInt16, tls: (certificate: String, privateKey: String)?,
            minimumTLSVersion: String = "1.2", maxConnections: Int = 10_000,
            session: IMAPSession.Configuration = IMAPSession.Configuration(), fetchCacheBytes: Int = 64 << 20
        ) {
            self.host = host
            self.port = port
            self.tls = tls
            self.minimumTLSVersion = minimumTLSVersion
            self.maxConnections = maxConnections
            self.session = session
            self.fetchCacheBytes = fetchCacheBytes
        }
    }

    /// The bound port.
    public let port: UInt16
    private let listener: Int32
    private let loop: ConnectionLoop<IMAPSession>
    private let running = LockedValue(false)
    private let finished = DispatchGroup()

    /// Binds the listener; ``start()`` begins serving.
    public init(configuration: Configuration, backend: any IMAPBackend) throws {
        var context: ServerTLSContext?
        if let tls = configuration.tls {
            do {
                context = try ServerTLSContext(
                    certificate: tls.certificate, privateKey: tls.privateKey,
                    minimumVersion: configuration.minimumTLSVersion)
            } catch {
                throw IMAPServerError(description: "imap: \(error.description)")
            }
        }
        do {
            (listener, port) = try ListeningSocket.bind(host: configuration.host, port: configuration.port)
        } catch {
            throw IMAPServerError(description: "imap: \(error.description)")
        }
        var sessionConfiguration = configuration.session
        sessionConfiguration.plaintext = configuration.tls == nil
        let session = sessionConfiguration
        let fetchCache = IMAPFetchCache(budgetBytes: configuration.fetchCacheBytes)
        do {
            loop = try ConnectionLoop(
                listener: listener, tls: context, maxConnections: configuration.maxConnections,
                refusal: "* BYE Too many connections; try again later\r\n"
            ) { address in
                IMAPSession(configuration: session, backend: backend, remoteAddress: address, fetchCache: fetchCache)
            }
        } catch {
            close(listener)
            throw IMAPServerError(description: "imap: \(error.reason)")
        }
    }

    /// Starts serving (once).
    public func start() {
        guard
            running.withLock({ running in
                defer { running = true }
                return !running
            })
        else { return }
        finished.enter()
        Thread.start(named: "imap", stackSize: 8 << 20) { [self] in
            loop.run()
            finished.leave()
        }
    }

    /// Tells a connection its account changed (from any thread).
    public func notify(_ connection: UInt64) { loop.notify(connection, .accountChanged) }

    /// Closes every connection and stops.
    public func shutdown() {
        if running.withLock({ $0 }) {
            loop.stop()
            finished.wait()
        } else {
            loop.closeInbox()
        }
        close(listener)
    }
}
