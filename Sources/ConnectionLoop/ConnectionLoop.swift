import CNGHTTP2
import Foundation
import HTTP2Support
import Locking

/// Why a ``ConnectionLoop`` could not be made.
package struct LoopSetupError: Error, Sendable {
    /// The failed call and its `strerror`.
    package var reason: String
}

/// One connection of a ``ConnectionLoop``: its socket, TLS engine, session and output. Loop thread only.
final class LoopConnection<Session: LoopSession> {
    let id: UInt64
    let fd: Int32
    var session: Session
    let tls: TLSEngine?
    /// Ciphertext (or plain bytes, without TLS) waiting for the socket.
    var output = OutputBuffer()
    /// Whether the session has been greeted (after the TLS handshake).
    var opened = false
    /// A question is with the backend: nothing is read until it answers.
    var awaiting = false
    /// Actions held behind the question.
    var deferred: [LoopAction<Session.Answer>] = []
    /// The socket failed (or the loop is stopping) while the backend worked: close once it answers.
    var broken = false
    /// The session asked to close: once the output is out, the connection closes.
    var closing = false
    /// The last time bytes arrived (monotonic nanoseconds).
    var lastActivity: UInt64
    /// The epoll events currently asked for.
    var interest: UInt32 = 0

    init(id: UInt64, fd: Int32, session: Session, tls: TLSEngine?, now: UInt64) {
        self.id = id
        self.fd = fd
        self.session = session
        self.tls = tls
        lastActivity = now
    }
}

/// The event loop under a line protocol's listener (STYLE 20): one thread, one epoll set (``Poller``), non-blocking
/// sockets, TLS through memory BIOs (``TLSEngine``), idle timers, and a hand-off to the backend whose answers come
/// back through a locked inbox. A protocol brings only its ``LoopSession``. An idle connection costs its memory and
/// nothing per event: only ready descriptors are visited, and the idle timers are checked once a second.
///
/// Thread-safety: everything but ``notify(_:_:)``, ``stop()`` and the answer closures runs on the loop's thread;
/// those touch only the inbox, under its lock, and wake the poller while it is open.
package final class ConnectionLoop<Session: LoopSession>: @unchecked Sendable {  // loop-thread confinement + inbox lock
    private enum Message {
        case answer(UInt64, Session.Answer)
        case event(UInt64, Session.Event)
    }

    private struct Inbox {
        var messages: [Message] = []
        var stopping = false
        var open = true
    }

    private static var listenerTag: UInt64 { UInt64.max - 1 }
    /// How often idle deadlines are checked.
    private static var tick: UInt64 { 1_000_000_000 }
    /// The most bytes read from one connection before the others get their turn.
    private static var readBudget: Int { 256 * 1024 }

    private let makeSession: @Sendable (_ peerAddress: String) -> Session
    private let tlsContext: ServerTLSContext?
    private let maxConnections: Int
    private let refusal: [UInt8]
    private let poller: Poller
    private let listener: Int32
    private let inbox = LockedValue(Inbox())
    private var connections: [UInt64: LoopConnection<Session>] = [:]
    private var nextID: UInt64 = 1
    private var outstanding = 0
    private var stopping = false
    private var listenerPaused = false
    private var now = DispatchTime.now().uptimeNanoseconds
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
    private let plainBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 16)

    /// A loop over `listener` (a bound, listening socket it does not own). `refusal` is written to a connection
    /// over `maxConnections` before it is closed (plain text: it is never a TLS client's first record).
    package init(
        listener: Int32, tls: ServerTLSContext?, maxConnections: Int, refusal: String,
        session: @escaping @Sendable (_ peerAddress: String) -> Session
    ) throws(LoopSetupError) {
        do {
            poller = try Poller(capacity: 256)
        } catch {
            throw LoopSetupError(reason: error.reason)
        }
        guard poller.add(listener, tag: Self.listenerTag, events: EPOLLIN.rawValue) else {
            poller.closeWake()
            throw LoopSetupError(reason: "epoll_ctl: \(String(cString: strerror(errno)))")
        }
        _ = fcntl(listener, F_SETFL, fcntl(listener, F_GETFL, 0) | O_NONBLOCK)
        self.listener = listener
        self.tlsContext = tls
        self.maxConnections = maxConnections
        self.refusal = Array(refusal.utf8)
        makeSession = session
    }

    deinit {
        readBuffer.deallocate()
        plainBuffer.deallocate()
    }

    /// How many connections are open (loop thread; for tests and metrics through the session's backend).
    package var connectionCount: Int { connections.count }

    // MARK: Any thread

    /// Tells connection `id` an event; dropped when it is gone or waiting for the backend.
    package func notify(_ id: UInt64, _ event: Session.Event) { post(.event(id, event)) }

    private func post(_ message: Message) {
        inbox.withLock { inbox in
            guard inbox.open else { return }
            inbox.messages.append(message)
            if inbox.messages.count == 1 { poller.wake() }
        }
    }

    /// Asks the loop to close every connection and return from ``run()`` once the backend answered what it holds.
    package func stop() {
        inbox.withLock { inbox in
            guard inbox.open else { return }
            inbox.stopping = true
            poller.wake()
        }
    }

    /// Closes the inbox for good: at the end of ``run()``, or instead of it when the loop never ran.
    package func closeInbox() {
        inbox.withLock { inbox in
            guard inbox.open else { return }
            inbox.open = false
            inbox.messages = []
            poller.closeWake()
        }
    }

    // MARK: The loop

    /// Runs until ``stop()`` has closed every connection. Call on the loop's own thread.
    package func run() {
        var lastTimerCheck = now
        while !(stopping && connections.isEmpty && outstanding == 0) {
            let timeout: Int32 = connections.isEmpty && !listenerPaused ? -1 : Int32(Self.tick / 1_000_000)
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

    private func acceptConnections() {
        while !stopping {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else {
                if errno == EINTR || errno == ECONNABORTED { continue }
                if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM {
                    poller.modify(listener, tag: Self.listenerTag, events: 0)
                    listenerPaused = true
                }
                return
            }
            guard connections.count < maxConnections else {
                _ = refusal.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                close(fd)
                continue
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK)
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            var tls: TLSEngine?
            if let tlsContext {
                guard let engine = TLSEngine(context: tlsContext.context, role: .server) else {
                    close(fd)
                    continue
                }
                tls = engine
            }
            let connection = LoopConnection(
                id: nextID, fd: fd, session: makeSession(Self.peerAddress(fd)), tls: tls, now: now)
            nextID += 1
            guard poller.add(fd, tag: connection.id, events: EPOLLIN.rawValue) else {
                close(fd)
                continue
            }
            connection.interest = EPOLLIN.rawValue
            connections[connection.id] = connection
            if tls == nil { open(connection) }
        }
    }

    /// The peer's IP address as text (empty when unknown).
    static func peerAddress(_ fd: Int32) -> String {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let found = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        guard found == 0 else { return "" }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let status = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST)
            }
        }
        return status == 0 ? String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    }

    private func open(_ connection: LoopConnection<Session>) {
        connection.opened = true
        carryOut(connection.session.opened(), on: connection)
        if connections[connection.id] != nil { settle(connection) }
    }

    private func handle(_ connection: LoopConnection<Session>, events: UInt32) {
        if events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0, connection.awaiting {
            return closeConnection(connection)
        }
        if events & (EPOLLOUT.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 {
            guard flush(connection) else { return closeConnection(connection) }
        }
        if events & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
            guard !connection.awaiting, !connection.closing else { return settle(connection) }
            read(connection)
        }
        if connections[connection.id] != nil { settle(connection) }
    }

    /// Reads what the peer sent (decrypting it) and lets the session answer, until the socket is empty, the budget
    /// is used or the session waits for the backend.
    private func read(_ connection: LoopConnection<Session>) {
        var gone = false
        let end = SocketIO.read(connection.fd, into: readBuffer, budget: Self.readBudget) { bytes in
            connection.lastActivity = now
            guard let tls = connection.tls else {
                carryOut(connection.session.received(bytes), on: connection)
                gone = connections[connection.id] == nil
                return !gone && !connection.awaiting && !connection.closing
            }
            tls.receiveCiphertext(bytes)
            if !tls.handshakeComplete {
                guard tls.continueHandshake() == .ok else {
                    gone = true
                    closeConnection(connection)
                    return false
                }
                tls.drainCiphertext(into: &connection.output)
                guard tls.handshakeComplete else { return true }
                open(connection)
                if connections[connection.id] == nil {
                    gone = true
                    return false
                }
            }
            return decrypt(connection, gone: &gone)
        }
        guard !gone else { return }
        switch end {
        case .drained, .stopped: break
        case .peerClosed, .failed: closeConnection(connection)
        }
    }

    /// Hands the plaintext TLS has ready to the session; false to stop reading.
    private func decrypt(_ connection: LoopConnection<Session>, gone: inout Bool) -> Bool {
        guard let tls = connection.tls else { return true }
        var stop = false
        let outcome = tls.readPlaintext(into: plainBuffer) { plain in
            carryOut(connection.session.received(plain), on: connection)
            stop = connections[connection.id] == nil || connection.awaiting || connection.closing
            return !stop
        }
        if connections[connection.id] == nil {
            gone = true
            return false
        }
        // `.failed` here is also the consumer asking to stop; the plaintext left waits in OpenSSL for the next read.
        if outcome == .closed || (outcome == .failed && !stop) {
            closeConnection(connection)
            gone = true
            return false
        }
        return !stop
    }

    /// Carries out the session's actions in order; what follows a question waits for its answer.
    private func carryOut(_ actions: [LoopAction<Session.Answer>], on connection: LoopConnection<Session>) {
        var actions = actions[...]
        while let action = actions.popFirst() {
            switch action {
            case .send(let bytes):
                if let tls = connection.tls {
                    guard bytes.withUnsafeBytes({ tls.writePlaintext($0) }) else {
                        connection.closing = true
                        return
                    }
                    tls.drainCiphertext(into: &connection.output)
                } else {
                    bytes.withUnsafeBytes { connection.output.append($0) }
                }
            case .close:
                connection.closing = true
                return
            case .ask(let question):
                connection.deferred = Array(actions)
                connection.awaiting = true
                outstanding += 1
                let id = connection.id
                question(id) { [self] answer in post(.answer(id, answer)) }
                return
            }
        }
    }

    private func processInbox() {
        poller.consumeWake()
        let (messages, stop) = inbox.withLock { inbox in
            defer { inbox.messages = [] }
            return (inbox.messages, inbox.stopping)
        }
        for message in messages {
            switch message {
            case .answer(let id, let answer):
                outstanding -= 1
                guard let connection = connections[id] else { continue }
                connection.awaiting = false
                guard !connection.broken, !stopping else {
                    closeConnection(connection)
                    continue
                }
                let held = connection.deferred
                connection.deferred = []
                carryOut(connection.session.answered(answer) + held, on: connection)
                resume(connection)
            case .event(let id, let event):
                guard let connection = connections[id], connection.opened, !connection.awaiting,
                    !connection.closing, !connection.broken
                else { continue }
                carryOut(connection.session.notified(event), on: connection)
                resume(connection)
            }
        }
        if stop, !stopping { beginStop() }
    }

    /// After an answer or an event: input that TLS already decrypted is not signalled by epoll again, so it is
    /// handed to the session now; then the connection is settled.
    private func resume(_ connection: LoopConnection<Session>) {
        guard connections[connection.id] != nil else { return }
        if !connection.awaiting, !connection.closing, connection.tls != nil {
            var gone = false
            _ = decrypt(connection, gone: &gone)
            if gone { return }
        }
        if connections[connection.id] != nil { settle(connection) }
    }

    /// Sends what is queued, closes a finished connection, and asks epoll for what the connection now waits for.
    private func settle(_ connection: LoopConnection<Session>) {
        guard !connection.broken else { return }
        guard flush(connection) else { return closeConnection(connection) }
        if connection.closing, connection.output.isEmpty, !connection.awaiting {
            return closeConnection(connection)
        }
        var wanted: UInt32 = 0
        if !connection.output.isEmpty { wanted |= EPOLLOUT.rawValue }
        if !connection.awaiting && !connection.closing { wanted |= EPOLLIN.rawValue }
        if wanted != connection.interest {
            connection.interest = wanted
            poller.modify(connection.fd, tag: connection.id, events: wanted)
        }
    }

    private func flush(_ connection: LoopConnection<Session>) -> Bool {
        guard !connection.output.isEmpty else { return true }
        if case .failed = SocketIO.write(connection.fd, from: &connection.output) { return false }
        return true
    }

    private func closeConnection(_ connection: LoopConnection<Session>) {
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
        connection.session.closed(connection: connection.id)
    }

    private func checkTimers() {
        if listenerPaused, !stopping {
            listenerPaused = false
            poller.modify(listener, tag: Self.listenerTag, events: EPOLLIN.rawValue)
        }
        for connection in Array(connections.values) where !connection.awaiting {
            let limit = UInt64(max(1, connection.opened ? connection.session.idleTimeout : 60)) * 1_000_000_000
            guard now &- connection.lastActivity >= limit else { continue }
            if connection.closing || !connection.output.isEmpty || !connection.opened {
                closeConnection(connection)
                continue
            }
            connection.lastActivity = now
            carryOut(connection.session.timedOut(), on: connection)
            if connections[connection.id] != nil { settle(connection) }
        }
    }

    private func beginStop() {
        stopping = true
        poller.remove(listener)
        for connection in Array(connections.values) { closeConnection(connection) }
    }
}
