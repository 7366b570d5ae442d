import ConnectionLoop
import Durations
import Foundation
import Locking

/// What the LMTP server needs from the mailbox: recipient lookups and deliveries. Both are called on the server's
/// event-loop thread and must not block it: each answers through `completion`, once, from any thread (at once when
/// the answer is at hand).
public protocol LMTPBackend: Sendable {
    /// Whether mail to `address` has an account to go to.
    func checkRecipient(_ address: String, completion: @escaping @Sendable (LMTPSession.RecipientCheck) -> Void)
    /// Stores `message` for each of the envelope's recipients; one result each, in order, once committed.
    func deliver(
        _ envelope: LMTPSession.Envelope, message: [UInt8],
        completion: @escaping @Sendable ([LMTPSession.DeliveryResult]) -> Void)
}

/// Why the LMTP listener could not start.
public struct LMTPServerError: Error, CustomStringConvertible {
    /// What failed, with the address.
    public let description: String
}

/// The LMTP listener (RFC 2033): ``LMTPSession`` on a ``ConnectionLoop`` (one thread, non-blocking sockets,
/// epoll), at most `maxConnections` at once (one more is told `421` and closed). Each connection's deliveries go to the backend without waiting on the loop, so concurrent sessions
/// share the store's group commits.
public final class LMTPServer: Sendable {
    /// Where to listen and the limits.
    public struct Configuration: Sendable {
        /// The address to bind.
        public var host: String
        /// The port (0 picks a free one).
        public var port: UInt16
        /// The session's name and limits.
        public var session: LMTPSession.Configuration
        /// The most simultaneous connections (Postfix opens up to 20 per destination by default).
        public var maxConnections: Int
        /// How long the client may stay silent (or leave its replies unread) before `421` (RFC 5321 suggests 5
        /// minutes).
        public var idleTimeout: Duration

        /// Creates a configuration.
        public init(
            host: String, port: UInt16, session: LMTPSession.Configuration, maxConnections: Int = 64,
            idleTimeout: Duration = .seconds(300)
        ) {
            self.host = host
            self.port = port
            self.session = session
            self.maxConnections = maxConnections
            self.idleTimeout = idleTimeout
        }
    }

    private enum Phase {
        case bound
        case running
        case stopped
    }

    /// The port the listener is bound to.
    public let port: UInt16
    private let listener: Int32
    private let loop: ConnectionLoop<LMTPLoopSession>
    private let phase = LockedValue(Phase.bound)
    private let finished = DispatchGroup()

    /// Binds the listener; ``start()`` begins accepting connections.
    public init(
        configuration: Configuration, backend: any LMTPBackend, log: @escaping @Sendable (String) -> Void = { _ in }
    ) throws {
        do {
            (listener, port) = try ListeningSocket.bind(
                host: configuration.host, port: configuration.port, backlog: 128)
        } catch {
            throw LMTPServerError(description: "lmtp: \(error.description)")
        }
        let session = configuration.session
        let idle = Int(max(1, configuration.idleTimeout.wholeMilliseconds))
        do {
            loop = try ConnectionLoop(
                listener: listener, tls: nil, maxConnections: configuration.maxConnections,
                refusal: "421 4.3.2 \(session.hostname) too many connections, try again later\r\n"
            ) { _ in LMTPLoopSession(configuration: session, idleTimeoutMilliseconds: idle, backend: backend, log: log)
            }
        } catch {
            close(listener)
            throw LMTPServerError(description: "lmtp: \(error.reason)")
        }
    }

    /// Starts accepting connections (once).
    public func start() {
        guard
            phase.withLock({ phase -> Bool in
                guard phase == .bound else { return false }
                phase = .running
                return true
            })
        else { return }
        finished.enter()
        // Parsing a deeply nested message recurses: room for it.
        Thread.start(named: "lmtp", stackSize: 8 << 20) { [self] in
            loop.run()
            finished.leave()
        }
    }

    /// Stops accepting, ends every session (a transaction in progress gets nothing stored), and returns once the
    /// deliveries already handed to the backend have been answered.
    public func shutdown() {
        let previous = phase.withLock { phase -> Phase in
            defer { phase = .stopped }
            return phase
        }
        switch previous {
        case .stopped: return
        case .bound: loop.closeInbox()
        case .running:
            loop.stop()
            finished.wait()
        }
        close(listener)
    }
}
