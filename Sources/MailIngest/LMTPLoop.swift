import CNGHTTP2
import Foundation
import HTTP2Support
import Locking

/// One LMTP connection: its socket, its session, the replies not yet sent and its timers. Touched on the loop's
/// thread only.
final class LMTPConnection {
    let id: UInt64
    let fd: Int32
    var session: LMTPSession
    var output = OutputBuffer()
    /// Actions left to carry out once the backend answers (replies queued behind a lookup or a delivery).
    var deferred: [LMTPSession.Action] = []
    /// A lookup or a delivery is with the backend: the session reads nothing until it answers.
    var awaiting = false
    /// The socket failed (or the server is stopping) while the backend worked: close once it answers.
    var broken = false
    /// The session asked to close: once the replies are out, the connection lingers.
    var closing = false
    /// Our side is shut and what the client still sends is dropped until this time (monotonic nanoseconds).
    var lingerUntil: UInt64?
    /// The last time bytes moved either way (monotonic nanoseconds).
    var lastActivity: UInt64
    /// The epoll events currently asked for.
    var interest: UInt32 = 0
    /// Copies stored in this session, for the log line when it ends.
    var delivered = 0

    init(id: UInt64, fd: Int32, session: LMTPSession, now: UInt64) {
        self.id = id
        self.fd = fd
        self.session = session
        lastActivity = now
    }
}

/// The LMTP event loop: one thread owns the listener and every connection (non-blocking sockets, epoll through
/// ``Poller``). Recipient lookups and deliveries go to the backend, which answers through a completion from any
/// thread; the answer comes back through the inbox and the session goes on from where it waited. A connection waiting
/// for the backend is not read, so a pipelining client's input waits in the kernel, not in memory.
///
/// Thread-safety: everything but ``post(_:_:)`` and ``stop()`` runs on the loop's thread; those two only touch the
/// inbox, under its lock, and wake the poller while it is open (see ``Poller``).
final class LMTPLoop: @unchecked Sendable {  // see above: loop-thread confinement + `inbox` lock
    /// What the backend answered for a connection.
    enum Answer: Sendable {
        case recipient(LMTPSession.RecipientCheck)
        case delivered([LMTPSession.DeliveryResult])
    }

    private struct Inbox {
        var answers: [(UInt64, Answer)] = []
        var stopping = false
        var open = true
    }

    private static let listenerTag = UInt64.max - 1
    /// How often idle and linger deadlines are checked.
    private static let tick: UInt64 = 100_000_000
    /// The most bytes read from one connection before the others get their turn.
    private static let readBudget = 256 * 1024
    /// How long a closing connection drops what the client still sends.
    private static let lingerTime: UInt64 = 1_600_000_000

    private let configuration: LMTPServer.Configuration
    private let backend: any LMTPBackend
    private let log: @Sendable (String) -> Void
    private let poller: Poller
    private let listener: Int32
    private let inbox = LockedValue(Inbox())
    private var connections: [UInt64: LMTPConnection] = [:]
    private var nextID: UInt64 = 1
    /// Lookups and deliveries the backend has not answered yet.
    private var outstanding = 0
    private var stopping = false
    /// Accepting stopped for want of descriptors; the next timer check listens again.
    private var listenerPaused = false
    private var now = DispatchTime.now().uptimeNanoseconds
    private let idleNanoseconds: UInt64
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)

    init(
        listener: Int32, configuration: LMTPServer.Configuration, backend: any LMTPBackend,
        log: @escaping @Sendable (String) -> Void
    ) throws {
        do {
            poller = try Poller(capacity: 64)
        } catch {
            throw LMTPServerError(description: "lmtp: \(error.reason)")
        }
        guard poller.add(listener, tag: Self.listenerTag, events: EPOLLIN.rawValue) else {
            poller.closeWake()
            throw LMTPServerError(description: "lmtp: epoll_ctl: \(String(cString: strerror(errno)))")
        }
        _ = fcntl(listener, F_SETFL, fcntl(listener, F_GETFL, 0) | O_NONBLOCK)
        self.listener = listener
        self.configuration = configuration
        self.backend = backend
        self.log = log
        idleNanoseconds = UInt64(max(1, configuration.idleTimeout.wholeMilliseconds)) * 1_000_000
    }

    deinit { readBuffer.deallocate() }

    // MARK: Any thread

    /// Hands the backend's answer for connection `id` to the loop.
    func post(_ id: UInt64, _ answer: Answer) {
        inbox.withLock { inbox in
            guard inbox.open else { return }
            inbox.answers.append((id, answer))
            if inbox.answers.count == 1 { poller.wake() }
        }
    }

    /// Asks the loop to end every session and return once the backend has answered everything it was asked.
    func stop() {
        inbox.withLock { inbox in
            guard inbox.open else { return }
            inbox.stopping = true
            poller.wake()
        }
    }

    // MARK: The loop

    /// Runs until ``stop()`` has ended every session. Call on the loop's own thread.
    func run() {
        var lastTimerCheck = now
        while !(stopping && connections.isEmpty && outstanding == 0) {
            let timeout: Int32 = connections.isEmpty ? -1 : Int32(Self.tick / 1_000_000)
            guard let count = poller.wait(timeoutMilliseconds: timeout) else { break }
            now = DispatchTime.now().uptimeNanoseconds
            for index in 0..<count {
                let (tag, events) = poller.ready(index)
                switch tag {
                case Self.listenerTag: acceptConnections()
                case Poller.wakeTag: processInbox()
                case let tag: if let connection = connections[tag] { handle(connection, events: events) }
                }
            }
            if now &- lastTimerCheck >= Self.tick {
                lastTimerCheck = now
                checkTimers()
            }
        }
        for connection in Array(connections.values) { closeConnection(connection) }
        closeInbox()
    }

    /// Closes the inbox (and the poller's wake-up) for good: at the end of ``run()``, or instead of it when the
    /// loop never ran.
    func closeInbox() {
        inbox.withLock { inbox in
            guard inbox.open else { return }
            inbox.open = false
            inbox.answers = []
            poller.closeWake()
        }
    }

    private func acceptConnections() {
        while !stopping {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else {
                if errno == EINTR || errno == ECONNABORTED { continue }
                // Out of descriptors leaves the listener readable: the next tick tries again rather than spinning.
                if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM {
                    poller.modify(listener, tag: Self.listenerTag, events: 0)
                    listenerPaused = true
                }
                return  // EAGAIN: nothing more
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            guard connections.count < configuration.maxConnections else {
                let refusal = "421 4.3.2 \(configuration.session.hostname) too many connections, try again later\r\n"
                _ = refusal.utf8CString.withUnsafeBytes { send(fd, $0.baseAddress, $0.count - 1, Int32(MSG_NOSIGNAL)) }
                close(fd)
                continue
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK)
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let connection = LMTPConnection(
                id: nextID, fd: fd, session: LMTPSession(configuration: configuration.session), now: now)
            nextID += 1
            guard poller.add(fd, tag: connection.id, events: 0) else {
                close(fd)
                continue
            }
            connections[connection.id] = connection
            connection.output.append(connection.session.greeting)
            settle(connection)
        }
    }

    private func handle(_ connection: LMTPConnection, events: UInt32) {
        if events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0, connection.awaiting {
            // epoll reports a hang-up whatever is asked for: out of the set until the backend answers.
            return closeConnection(connection)
        }
        if events & EPOLLOUT.rawValue != 0 || events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 {
            guard flush(connection) else { return closeConnection(connection) }
        }
        if events & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
            if connection.lingerUntil != nil { return drain(connection) }
            guard !connection.awaiting, !connection.closing else { return settle(connection) }
            read(connection)
        }
        if connections[connection.id] != nil { settle(connection) }
    }

    /// Reads what the client sent and lets the session answer, until the socket is empty, the budget is used or
    /// the session waits for the backend.
    private func read(_ connection: LMTPConnection) {
        var gone = false
        let end = SocketIO.read(connection.fd, into: readBuffer, budget: Self.readBudget) { bytes in
            connection.lastActivity = now
            let actions = connection.session.receive(bytes)
            carryOut(actions, on: connection)
            gone = connections[connection.id] == nil
            return !gone && !connection.awaiting && !connection.closing
        }
        guard !gone else { return }
        switch end {
        case .drained, .stopped: break
        case .peerClosed, .failed: closeConnection(connection)
        }
    }

    /// Carries out the session's actions in order. A lookup or a delivery goes to the backend; what follows it
    /// waits for the answer.
    private func carryOut(_ actions: [LMTPSession.Action], on connection: LMTPConnection) {
        var actions = actions[...]
        while let action = actions.popFirst() {
            switch action {
            case .send(let text):
                connection.output.append(text)
            case .close:
                connection.closing = true
                return
            case .verifyRecipient(let address):
                connection.deferred = Array(actions)
                return ask(connection) { answer in
                    self.backend.checkRecipient(address) { answer(.recipient($0)) }
                }
            case .deliver(let envelope, let message):
                connection.deferred = Array(actions)
                return ask(connection) { answer in
                    self.backend.deliver(envelope, message: message) { answer(.delivered($0)) }
                }
            }
        }
    }

    /// Puts a question to the backend for `connection`. An answer given before the backend returns (a cached
    /// lookup) is taken at once; a later one comes through the inbox.
    private func ask(
        _ connection: LMTPConnection, _ question: (@escaping @Sendable (Answer) -> Void) -> Void
    ) {
        connection.awaiting = true
        outstanding += 1
        let id = connection.id
        let early = LockedValue<(returned: Bool, answer: Answer?)>((false, nil))
        question { [self] answer in
            let taken = early.withLock { state -> Bool in
                guard !state.returned else { return false }
                state.answer = answer
                return true
            }
            if !taken { post(id, answer) }
        }
        let answer = early.withLock { state -> Answer? in
            state.returned = true
            return state.answer
        }
        if let answer { answered(connection, answer) }
    }

    private func processInbox() {
        poller.consumeWake()
        let (answers, stop) = inbox.withLock { inbox in
            defer { inbox.answers = [] }
            return (inbox.answers, inbox.stopping)
        }
        for (id, answer) in answers {
            guard let connection = connections[id] else { continue }
            answered(connection, answer)
            if connections[id] != nil { settle(connection) }
        }
        if stop, !stopping { beginStop() }
    }

    /// The backend answered: the session goes on, then the replies held behind the question, then the input the
    /// session kept meanwhile.
    private func answered(_ connection: LMTPConnection, _ answer: Answer) {
        outstanding -= 1
        connection.awaiting = false
        let actions: [LMTPSession.Action]
        switch answer {
        case .recipient(let check):
            actions = connection.session.recipientVerified(check)
        case .delivered(let results):
            connection.delivered += results.filter { $0 == .stored }.count
            actions = connection.session.delivered(results)
        }
        guard !connection.broken, !stopping else { return closeConnection(connection) }
        let held = connection.deferred
        connection.deferred = []
        carryOut(actions + held, on: connection)
    }

    /// After the connection was handled: sends what is queued, starts lingering once a closing session's replies
    /// are out, and asks epoll for what the connection now waits for.
    private func settle(_ connection: LMTPConnection) {
        guard !connection.broken else { return }
        guard flush(connection) else { return closeConnection(connection) }
        if connection.closing, connection.lingerUntil == nil, connection.output.isEmpty {
            Glibc.shutdown(connection.fd, Int32(SHUT_WR))
            connection.lingerUntil = now + Self.lingerTime
        }
        var wanted: UInt32 = 0
        if !connection.output.isEmpty { wanted |= EPOLLOUT.rawValue }
        if connection.lingerUntil != nil || (!connection.awaiting && !connection.closing) {
            wanted |= EPOLLIN.rawValue
        }
        if wanted != connection.interest {
            connection.interest = wanted
            poller.modify(connection.fd, tag: connection.id, events: wanted)
        }
    }

    /// Sends what the connection has queued; false when the socket failed.
    private func flush(_ connection: LMTPConnection) -> Bool {
        guard !connection.output.isEmpty else { return true }
        let before = connection.output.count
        let end = SocketIO.write(connection.fd, from: &connection.output)
        if connection.output.count != before { connection.lastActivity = now }
        if case .failed = end { return false }
        return true
    }

    /// A closing connection: what the client still sends is read and dropped, so the kernel does not answer
    /// unread input with a reset that could destroy the last reply.
    private func drain(_ connection: LMTPConnection) {
        let end = SocketIO.read(connection.fd, into: readBuffer, budget: Self.readBudget) { _ in true }
        if end != .drained { closeConnection(connection) }
    }

    private func closeConnection(_ connection: LMTPConnection) {
        if connection.awaiting {
            // The backend still holds this connection's question: close when it answers.
            guard !connection.broken else { return }
            connection.broken = true
            Glibc.shutdown(connection.fd, Int32(SHUT_RDWR))
            poller.remove(connection.fd)
            return
        }
        guard connections.removeValue(forKey: connection.id) != nil else { return }
        if !connection.broken { poller.remove(connection.fd) }
        close(connection.fd)
        if connection.delivered > 0 { log("lmtp: session ended after \(connection.delivered) message(s)") }
    }

    private func checkTimers() {
        if listenerPaused, !stopping {
            listenerPaused = false
            poller.modify(listener, tag: Self.listenerTag, events: EPOLLIN.rawValue)
        }
        for connection in Array(connections.values) {
            if let lingerUntil = connection.lingerUntil {
                if now >= lingerUntil { closeConnection(connection) }
                continue
            }
            guard !connection.awaiting, now &- connection.lastActivity >= idleNanoseconds else { continue }
            if connection.closing || !connection.output.isEmpty {
                // The client stopped reading its replies: dropped after the same time as one that stops writing.
                closeConnection(connection)
                continue
            }
            carryOut(connection.session.timedOut(), on: connection)
            settle(connection)
        }
    }

    /// Stops accepting and ends every session; a transaction in progress gets nothing stored. Connections waiting
    /// for the backend close when it answers.
    private func beginStop() {
        stopping = true
        poller.remove(listener)
        for connection in Array(connections.values) { closeConnection(connection) }
    }
}

extension OutputBuffer {
    fileprivate mutating func append(_ text: String) {
        var text = text
        text.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }
}
