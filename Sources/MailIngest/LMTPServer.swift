import Durations
import Foundation
import Locking

/// What the LMTP server needs from the mailbox: recipient lookups and deliveries. Both are called on the
/// connection's own thread and may block it (never a thread of Swift's cooperative pool).
public protocol LMTPBackend: Sendable {
    /// Whether mail to `address` has an account to go to.
    func checkRecipient(_ address: String) -> LMTPSession.RecipientCheck
    /// Stores `message` for each of the envelope's recipients; one result each, in order, once committed.
    func deliver(_ envelope: LMTPSession.Envelope, message: [UInt8]) -> [LMTPSession.DeliveryResult]
}

/// Why the LMTP listener could not start.
public struct LMTPServerError: Error, CustomStringConvertible {
    /// What failed, with the address.
    public let description: String
}

/// The LMTP listener (RFC 2033): the socket shell around ``LMTPSession``. One thread per connection, blocking
/// reads with the command timeout, at most `maxConnections` at once (one more is told `421` and closed). Each
/// connection's deliveries go to the backend, so concurrent sessions share the store's group commits.
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
        /// How long the client may stay silent before `421` (RFC 5321 suggests 5 minutes).
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

    private struct State {
        var open: Set<Int32> = []
        var started = false
        var stopping = false
    }

    /// The port the listener is bound to.
    public let port: UInt16
    private let configuration: Configuration
    private let backend: any LMTPBackend
    private let listener: Int32
    private let wake: (read: Int32, write: Int32)
    private let state = LockedValue(State())
    private let threads = DispatchGroup()
    private let log: @Sendable (String) -> Void

    /// Binds the listener; ``start()`` begins accepting connections.
    public init(
        configuration: Configuration, backend: any LMTPBackend, log: @escaping @Sendable (String) -> Void = { _ in }
    ) throws {
        (listener, port) = try Self.listen(host: configuration.host, port: configuration.port)
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else {
            close(listener)
            throw LMTPServerError(description: "lmtp: pipe: \(String(cString: strerror(errno)))")
        }
        wake = (pipeEnds[0], pipeEnds[1])
        self.configuration = configuration
        self.backend = backend
        self.log = log
    }

    /// Starts accepting connections (once).
    public func start() {
        guard
            state.withLock({ state -> Bool in
                defer { state.started = true }
                return !state.started && !state.stopping
            })
        else { return }
        threads.enter()
        let thread = Thread { [self] in
            acceptLoop()
            threads.leave()
        }
        thread.name = "lmtp-accept"
        thread.start()
    }

    /// Stops accepting, ends every session (a transaction in progress gets nothing stored), and returns once each
    /// connection's thread is done.
    public func shutdown() {
        // Under the lock: a session closes its descriptor under it too, so no number shut down here can have been
        // closed and reused meanwhile.
        state.withLock { state in
            state.stopping = true
            for fd in state.open { Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
        }
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
        threads.wait()
        close(listener)
        close(wake.read)
        close(wake.write)
    }

    // MARK: - Accepting

    private func acceptLoop() {
        var fds = [
            pollfd(fd: listener, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let ready = poll(&fds, 2, -1)
            if ready < 0, errno == EINTR { continue }
            if state.withLock({ $0.stopping }) || fds[1].revents != 0 { return }
            guard fds[0].revents & Int16(POLLIN) != 0 else { continue }
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else {
                // Out of descriptors (EMFILE, ENFILE) leaves the listener readable: wait rather than spin.
                if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM { usleep(50_000) }
                continue
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            let admitted = state.withLock { state -> Bool in
                guard !state.stopping, state.open.count < configuration.maxConnections else { return false }
                state.open.insert(fd)
                return true
            }
            guard admitted else {
                Self.sendAll(
                    fd, "421 4.3.2 \(configuration.session.hostname) too many connections, try again later\r\n")
                close(fd)
                continue
            }
            threads.enter()
            let thread = Thread { [self] in
                serve(fd)
                Self.linger(fd)
                state.withLock { state in
                    state.open.remove(fd)
                    close(fd)
                }
                threads.leave()
            }
            thread.name = "lmtp-session"
            // Parsing a deeply nested message recurses: room for it.
            thread.stackSize = 8 << 20
            thread.start()
        }
    }

    // MARK: - One connection

    private func serve(_ fd: Int32) {
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let timeout = configuration.idleTimeout
        let timeoutMilliseconds = Int32(clamping: timeout.wholeMilliseconds)
        // A client that stops reading its replies is dropped after the same time as one that stops writing.
        var sendTimeout = timeval(
            tv_sec: Int(timeoutMilliseconds / 1000), tv_usec: Int(timeoutMilliseconds % 1000) * 1000)
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &sendTimeout, socklen_t(MemoryLayout<timeval>.size))
        var session = LMTPSession(configuration: configuration.session)
        guard Self.sendAll(fd, session.greeting) else { return }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var delivered = 0
        defer { if delivered > 0 { log("lmtp: session ended after \(delivered) message(s)") } }
        while !session.isClosed {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, timeoutMilliseconds)
            if ready < 0, errno == EINTR { continue }
            var actions: [LMTPSession.Action]
            if ready == 0 {
                actions = session.timedOut()
            } else {
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return }  // the client left (or shutdown() ended the session)
                actions = session.receive(buffer[0..<count])
            }
            // Carry out the actions; a lookup or a delivery yields more actions, carried out in turn. Replies are
            // gathered and sent together once the input read so far is handled (before waiting for more, or
            // closing): a pipelined client's MAIL, RCPT and DATA replies go out in one send, not one each.
            var replies = ""
            while !actions.isEmpty {
                let action = actions.removeFirst()
                switch action {
                case .send(let text):
                    replies += text
                case .close:
                    Self.sendAll(fd, replies)
                    return
                case .verifyRecipient(let address):
                    actions = session.recipientVerified(backend.checkRecipient(address)) + actions
                case .deliver(let envelope, let message):
                    let results = backend.deliver(envelope, message: message)
                    delivered += results.filter { $0 == .stored }.count
                    actions = session.delivered(results) + actions
                }
            }
            guard replies.isEmpty || Self.sendAll(fd, replies) else { return }
        }
    }

    /// Ends the connection gently: our side first, then whatever the client still sends is read and dropped for a
    /// moment, so the kernel does not answer unread input with a reset that could destroy the last reply.
    private static func linger(_ fd: Int32) {
        Glibc.shutdown(fd, Int32(SHUT_WR))
        var scratch = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<16 {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 100) > 0 else { return }
            let count = scratch.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count <= 0 { return }
        }
    }

    @discardableResult
    private static func sendAll(_ fd: Int32, _ text: String) -> Bool {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let sent = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0, errno == EINTR { continue }
            guard sent > 0 else { return false }
            bytes = bytes.dropFirst(sent)
        }
        return true
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
