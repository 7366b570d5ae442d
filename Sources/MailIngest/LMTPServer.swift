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

/// The LMTP listener (RFC 2033): the socket shell around ``LMTPSession``. One event-loop thread serves every
/// connection (``LMTPLoop``: non-blocking sockets, epoll), at most `maxConnections` at once (one more is told `421`
/// and closed). Each connection's deliveries go to the backend without waiting on the loop, so concurrent sessions
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
    private let loop: LMTPLoop
    private let phase = LockedValue(Phase.bound)
    private let finished = DispatchGroup()

    /// Binds the listener; ``start()`` begins accepting connections.
    public init(
        configuration: Configuration, backend: any LMTPBackend, log: @escaping @Sendable (String) -> Void = { _ in }
    ) throws {
        (listener, port) = try Self.listen(host: configuration.host, port: configuration.port)
        do {
            loop = try LMTPLoop(listener: listener, configuration: configuration, backend: backend, log: log)
        } catch {
            close(listener)
            throw error
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

    // MARK: - Binding

    private static func listen(host: String, port: UInt16) throws -> (Int32, UInt16) {
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw LMTPServerError(description: "lmtp: cannot resolve \(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        let address = first.pointee
        let fd = socket(address.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw LMTPServerError(description: "lmtp: socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard Glibc.bind(fd, address.ai_addr, address.ai_addrlen) == 0, Glibc.listen(fd, 128) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw LMTPServerError(description: "lmtp: cannot listen on \(host):\(port): \(reason)")
        }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        let family = storage.ss_family
        let bound: UInt16 = withUnsafePointer(to: &storage) { pointer in
            if family == sa_family_t(AF_INET6) {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    UInt16(bigEndian: $0.pointee.sin6_port)
                }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                UInt16(bigEndian: $0.pointee.sin_port)
            }
        }
        return (fd, bound)
    }
}
