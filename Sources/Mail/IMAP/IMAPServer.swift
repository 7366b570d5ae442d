import ConnectionLoop
import Foundation
import Locking

/// Why the IMAP listener could not start.
public struct IMAPServerError: Error, CustomStringConvertible {
    /// What failed.
    public let description: String
}

/// The IMAP listener: ``IMAPSession`` on ``ConnectionLoop``s (one thread each, one per core by default, epoll, TLS
/// in memory) sharing the listening socket, implicit TLS (RFC 8314) unless the development plain-text mode is asked
/// for. A commit wakes every watching connection on its own loop, so the fan-out to thousands of idling clients is
/// spread over the cores.
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
        /// How many loop threads serve the connections (at least 1; default: one per core, at most 8).
        public var loopThreads: Int

        /// Creates a configuration.
        public init(
            host: String, port: UInt16, tls: (certificate: String, privateKey: String)?,
            minimumTLSVersion: String = "1.2", maxConnections: Int = 10_000,
            session: IMAPSession.Configuration = IMAPSession.Configuration(), fetchCacheBytes: Int = 64 << 20,
            loopThreads: Int = min(8, ProcessInfo.processInfo.activeProcessorCount)
        ) {
            self.host = host
            self.port = port
            self.tls = tls
            self.minimumTLSVersion = minimumTLSVersion
            self.maxConnections = maxConnections
            self.session = session
            self.fetchCacheBytes = fetchCacheBytes
            self.loopThreads = max(1, loopThreads)
        }
    }

    /// The bound port.
    public let port: UInt16
    private let listener: Int32
    private let loops: [ConnectionLoop<IMAPSession>]
    private let tls: ServerTLSContext?
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
        let allowance = ConnectionAllowance(limit: configuration.maxConnections)
        let count = max(1, configuration.loopThreads)
        var loops: [ConnectionLoop<IMAPSession>] = []
        do {
            for index in 0..<count {
                loops.append(
                    try ConnectionLoop(
                        listener: listener, tls: context, allowance: allowance,
                        refusal: "* BYE Too many connections; try again later\r\n", index: index, count: count
                    ) { address in
                        IMAPSession(
                            configuration: session, backend: backend, remoteAddress: address, fetchCache: fetchCache)
                    })
            }
        } catch {
            for loop in loops { loop.closeInbox() }
            close(listener)
            throw IMAPServerError(description: "imap: \(error.reason)")
        }
        self.loops = loops
        tls = context
    }

    /// Reads the certificate and key files again and serves them to new connections; open ones keep theirs. Throws,
    /// and serves what it served, when they cannot be used.
    public func reloadTLS() throws(IMAPServerError) {
        do {
            try tls?.reload()
        } catch {
            throw IMAPServerError(description: "imap: \(error.description)")
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
        for (index, loop) in loops.enumerated() {
            finished.enter()
            Thread.start(named: index == 0 ? "imap" : "imap-\(index + 1)", stackSize: 8 << 20) { [finished] in
                loop.run()
                finished.leave()
            }
        }
    }

    /// Tells connections their account changed (from any thread): on the loops that hold them, each loop woken once.
    public func notify(_ connections: some Sequence<UInt64>) {
        var byLoop = [[UInt64]](repeating: [], count: loops.count)
        for connection in connections {
            byLoop[ConnectionLoop<IMAPSession>.loopIndex(of: connection, count: loops.count)].append(connection)
        }
        for (loop, connections) in zip(loops, byLoop) { loop.notify(connections, .accountChanged) }
    }

    /// Closes every connection and stops.
    public func shutdown() {
        if running.withLock({ $0 }) {
            for loop in loops { loop.stop() }
            finished.wait()
        } else {
            for loop in loops { loop.closeInbox() }
        }
        close(listener)
    }
}
