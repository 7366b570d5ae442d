import CEpoll
import Durations
import Foundation
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
    /// Input came while the backend had a question. Until then the socket stays registered for input (a client
    /// waiting for its answer sends nothing meanwhile), so a question and its answer cost no `epoll_ctl`; the first
    /// input that finds it waiting takes the registration off until the answer is in.
    var inputWhileAwaiting = false
    /// Actions held behind the question.
    var deferred: [LoopAction<Session.Answer>] = []
    /// The latest event that came while the backend had a question: told once the answer is in.
    var missedEvent: Session.Event?
    /// The socket failed (or the loop is stopping) while the backend worked: close once it answers.
    var broken = false
    /// The session asked to close: once the output is out, the connection closes.
    var closing = false
    /// The last time bytes moved either way (monotonic nanoseconds).
    var lastActivity: UInt64
    /// Our side is shut and what the peer still sends is dropped until this time (monotonic nanoseconds).
    var lingerUntil: UInt64?
    /// The time of the connection's earliest entry in the loop's deadline heap (0: none).
    var nextCheck: UInt64 = 0
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

    private typealias Action = LoopAction<Session.Answer>

    private static var listenerTag: UInt64 { UInt64.max - 1 }
    /// How often due deadlines are looked for (a look at the heap's top: nothing per connection).
    private static var tick: UInt64 { 100_000_000 }
    /// The most bytes read from one connection before the others get their turn.
    private static var readBudget: Int { 256 * 1024 }
    /// Past this much output waiting for the peer, the loop reads nothing more from it until the peer takes some: a
    /// peer that sends and never reads cannot make answers pile up without bound (it is closed at its idle deadline).
    private static var outputHighWater: Int { 1 << 20 }
    /// How long a closing connection drops what the peer still sends, so the kernel does not answer unread input
    /// with a reset that could destroy the last reply.
    private static var lingerTime: UInt64 { 1_600_000_000 }

    private let makeSession: @Sendable (_ peerAddress: String) -> Session
    private let tlsContext: ServerTLSContext?
    private let allowance: ConnectionAllowance
    private let refusal: [UInt8]
    private let poller: Poller
    private let listener: Int32
    private let inbox = LockedValue(Inbox())
    private var connections: [UInt64: LoopConnection<Session>] = [:]
    /// When each connection may next be due, earliest first; an entry is checked against the connection when it
    /// comes up and put back with the connection's real deadline if activity moved it. So a timer costs nothing per
    /// byte or per event, and a check visits only connections whose entry is due, never every connection.
    private var deadlines = DeadlineHeap()
    private var nextID: UInt64
    private let idStride: UInt64
    /// How many connections one wake-up accepts: all that wait when the loop is alone on its listener; a few when it
    /// shares it, so that the loops (all woken by a new connection) split a burst by how busy each is.
    private let acceptBatch: Int
    private var outstanding = 0
    private var stopping = false
    private var listenerPaused = false
    private var now = MonotonicTime.nanoseconds()
    private let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
    private let plainBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 16)

    /// A loop over `listener` (a bound, listening socket it does not own). `refusal` is written to a connection
    /// over `maxConnections` before it is closed (plain text: it is never a TLS client's first record).
    ///
    /// Several loops may serve one listener, each on its own thread (one per core): each accepts what its epoll set
    /// wakes it for, they count against one shared `allowance`, and loop `index` of `count` numbers its connections
    /// `index + 1`, `index + 1 + count`, …, so a connection's id says which loop holds it (``loopIndex(of:count:)``).
    package convenience init(
        listener: Int32, tls: ServerTLSContext?, maxConnections: Int, refusal: String,
        session: @escaping @Sendable (_ peerAddress: String) -> Session
    ) throws(LoopSetupError) {
        try self.init(
            listener: listener, tls: tls, allowance: ConnectionAllowance(limit: maxConnections), refusal: refusal,
            index: 0, count: 1, session: session)
    }

    /// Loop `index` of `count` over one listener, sharing `allowance` (see the other initializer).
    package init(
        listener: Int32, tls: ServerTLSContext?, allowance: ConnectionAllowance, refusal: String, index: Int,
        count: Int, session: @escaping @Sendable (_ peerAddress: String) -> Session
    ) throws(LoopSetupError) {
        precondition(count >= 1 && index >= 0 && index < count, "loop \(index) of \(count)")
        nextID = UInt64(index) + 1
        idStride = UInt64(count)
        acceptBatch = count == 1 ? Int.max : 4
        do {
            poller = try Poller(capacity: 256)
        } catch {
            throw LoopSetupError(reason: error.reason)
        }
        guard poller.add(listener, tag: Self.listenerTag, events: EPOLLIN.rawValue) else {
            throw LoopSetupError(reason: "epoll_ctl: \(String(cString: strerror(errno)))")
        }
        _ = fcntl(listener, F_SETFL, fcntl(listener, F_GETFL, 0) | O_NONBLOCK)
        self.listener = listener
        self.tlsContext = tls
        self.allowance = allowance
        self.refusal = Array(refusal.utf8)
        makeSession = session
    }

    deinit {
        readBuffer.deallocate()
        plainBuffer.deallocate()
    }

    /// How many connections are open (loop thread; for tests and metrics through the session's backend).
    package var connectionCount: Int { connections.count }

    /// Which of `count` loops over one listener holds connection `id`.
    package static func loopIndex(of id: UInt64, count: Int) -> Int { Int((id &- 1) % UInt64(max(1, count))) }

    // MARK: Any thread

    /// Tells connection `id` an event (dropped when it is gone; held while it waits for the backend).
    package func notify(_ id: UInt64, _ event: Session.Event) { post(.event(id, event)) }

    /// Tells each connection of `ids` the same event, with one lock and one wake-up for all of them (a change told
    /// to every socket of an account).
    package func notify(_ ids: some Collection<UInt64>, _ event: Session.Event) {
        guard !ids.isEmpty else { return }
        let first = inbox.withLock { inbox in
            guard inbox.open else { return false }
            let wasEmpty = inbox.messages.isEmpty
            for id in ids { inbox.messages.append(.event(id, event)) }
            return wasEmpty
        }
        if first { poller.wake() }
    }

    private func post(_ message: Message) {
        let first = inbox.withLock { inbox in
            guard inbox.open else { return false }
            inbox.messages.append(message)
            return inbox.messages.count == 1
        }
        // Woken after the lock is let go: the loop takes it at once to read the inbox.
        if first { poller.wake() }
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
        }
    }

    // MARK: The loop

    /// Runs until ``stop()`` has closed every connection. Call on the loop's own thread.
    package func run() {
        var lastTimerCheck = now
        while !(stopping && connections.isEmpty && outstanding == 0) {
            let timeout: Int32 = connections.isEmpty && !listenerPaused ? -1 : Int32(Self.tick / 1_000_000)
            guard let count = poller.wait(timeoutMilliseconds: timeout) else { break }
            now = MonotonicTime.nanoseconds()
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
        var accepted = 0
        var opened = 0
        defer { if opened > 0 { HeapTrim.shared.connectionsOpened(opened) } }
        while !stopping, accepted < acceptBatch {
            accepted += 1
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else {
                if errno == EINTR || errno == ECONNABORTED { continue }
                if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM {
                    poller.modify(listener, tag: Self.listenerTag, events: 0)
                    listenerPaused = true
                }
                return
            }
            guard allowance.take() else {
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
                guard let engine = tlsContext.withContext({ TLSEngine(context: $0, role: .server) }) else {
                    close(fd)
                    allowance.give()
                    continue
                }
                tls = engine
            }
            let connection = LoopConnection(
                id: nextID, fd: fd, session: makeSession(Self.peerAddress(fd)), tls: tls, now: now)
            nextID += idStride
            guard poller.add(fd, tag: connection.id, events: EPOLLIN.rawValue) else {
                close(fd)
                allowance.give()
                continue
            }
            connection.interest = EPOLLIN.rawValue
            connections[connection.id] = connection
            opened += 1
            schedule(connection)
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
            if connection.lingerUntil != nil { return drain(connection) }
            guard !connection.awaiting, !connection.closing else {
                if connection.awaiting { connection.inputWhileAwaiting = true }
                return settle(connection)
            }
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
        // By index, not through an ArraySlice: the loop runs unspecialized, and a slice of a generic element looks
        // its metadata up on every step.
        var next = actions.startIndex
        while next < actions.endIndex {
            let action = actions[next]
            next += 1
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
                connection.deferred = next < actions.endIndex ? Array(actions[next...]) : []
                connection.awaiting = true
                outstanding += 1
                let id = connection.id
                // An answer given before the question returns (a cached lookup) is taken at once; a later one
                // comes through the inbox.
                // A struct, not a labelled tuple: the loop runs unspecialized, and a tuple's metadata is looked up
                // (its labels compared as strings) on every question.
                let early = LockedValue(EarlyAnswer<Session.Answer>())
                question(id) { [self] answer in
                    let taken = early.withLock { state -> Bool in
                        guard !state.returned else { return false }
                        state.answer = answer
                        return true
                    }
                    if !taken { post(.answer(id, answer)) }
                }
                let answer = early.withLock { state -> Session.Answer? in
                    state.returned = true
                    return state.answer
                }
                if let answer {
                    outstanding -= 1
                    connection.awaiting = false
                    connection.inputWhileAwaiting = false
                    guard !connection.broken, !stopping else { return closeConnection(connection) }
                    carryOut(answered(answer, on: connection), on: connection)
                    tellMissedEvent(connection)
                }
                return
            }
        }
    }

    /// Tells the session the event that came while it waited for the backend, now that it does not.
    private func tellMissedEvent(_ connection: LoopConnection<Session>) {
        guard connections[connection.id] != nil, !connection.awaiting, !connection.closing, !connection.broken,
            let event = connection.missedEvent
        else { return }
        connection.missedEvent = nil
        carryOut(connection.session.notified(event), on: connection)
    }

    /// The session's actions for its answer, then those its question held back.
    private func answered(_ answer: Session.Answer, on connection: LoopConnection<Session>) -> [Action] {
        let actions = connection.session.answered(answer)
        guard !connection.deferred.isEmpty else { return actions }
        defer { connection.deferred = [] }
        return actions + connection.deferred
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
                connection.inputWhileAwaiting = false
                guard !connection.broken, !stopping else {
                    closeConnection(connection)
                    continue
                }
                carryOut(answered(answer, on: connection), on: connection)
                tellMissedEvent(connection)
                resume(connection)
            case .event(let id, let event):
                guard let connection = connections[id], connection.opened, !connection.closing, !connection.broken
                else { continue }
                if connection.awaiting {
                    // The answer may have been read before what this event tells: told once it is in.
                    connection.missedEvent = event
                    continue
                }
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
        if connection.closing, connection.output.isEmpty, !connection.awaiting, connection.lingerUntil == nil {
            Glibc.shutdown(connection.fd, Int32(SHUT_WR))
            connection.lingerUntil = now + Self.lingerTime
        }
        var wanted: UInt32 = 0
        if !connection.output.isEmpty { wanted |= EPOLLOUT.rawValue }
        if connection.lingerUntil != nil
            || (!(connection.awaiting && connection.inputWhileAwaiting) && !connection.closing
                && connection.output.count < Self.outputHighWater)
        {
            wanted |= EPOLLIN.rawValue
        }
        if wanted != connection.interest {
            connection.interest = wanted
            poller.modify(connection.fd, tag: connection.id, events: wanted)
        }
        schedule(connection)
    }

    private func flush(_ connection: LoopConnection<Session>) -> Bool {
        guard !connection.output.isEmpty else { return true }
        let before = connection.output.count
        let end = SocketIO.write(connection.fd, from: &connection.output)
        if connection.output.count != before { connection.lastActivity = now }
        if case .failed = end { return false }
        return true
    }

    /// A lingering connection: what the peer still sends is read and dropped; its end closes the connection.
    private func drain(_ connection: LoopConnection<Session>) {
        let end = SocketIO.read(connection.fd, into: readBuffer, budget: Self.readBudget) { _ in true }
        if end != .drained { closeConnection(connection) }
    }

    /// When `connection` is next due: the end of its linger, else its idle deadline.
    private func deadline(of connection: LoopConnection<Session>) -> UInt64 {
        if let lingerUntil = connection.lingerUntil { return lingerUntil }
        let milliseconds = connection.opened ? connection.session.idleTimeoutMilliseconds : 60_000
        return connection.lastActivity + UInt64(max(1, milliseconds)) * 1_000_000
    }

    /// Makes sure the deadline heap holds an entry for the connection no later than its deadline: an entry that is
    /// early is checked when it comes up and put back; only a deadline that moved earlier needs a new one.
    private func schedule(_ connection: LoopConnection<Session>) {
        let due = deadline(of: connection)
        guard connection.nextCheck == 0 || due < connection.nextCheck else { return }
        connection.nextCheck = due
        deadlines.push(due, connection.id)
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
        allowance.give()
        connection.session.closed(connection: connection.id)
    }

    private func checkTimers() {
        if listenerPaused, !stopping {
            listenerPaused = false
            poller.modify(listener, tag: Self.listenerTag, events: EPOLLIN.rawValue)
        }
        while let (due, id) = deadlines.top, due <= now {
            deadlines.pop()
            // An entry the connection no longer counts on (a newer, earlier one was pushed) is passed over.
            guard let connection = connections[id], connection.nextCheck == due else { continue }
            connection.nextCheck = 0
            if connection.awaiting {
                // The backend holds it; its timer starts again from the answer.
                connection.lastActivity = max(connection.lastActivity, now)
                schedule(connection)
                continue
            }
            guard deadline(of: connection) <= now else {
                schedule(connection)  // activity moved it: back in at its real deadline
                continue
            }
            if connection.lingerUntil != nil || connection.closing || !connection.output.isEmpty || !connection.opened {
                // A peer that stops reading its replies is dropped after the same time as one that stops writing.
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

/// A binary min-heap of (deadline, connection id).
struct DeadlineHeap {
    private var entries: [(UInt64, UInt64)] = []

    /// The earliest entry.
    var top: (UInt64, UInt64)? { entries.first }

    mutating func push(_ deadline: UInt64, _ id: UInt64) {
        entries.append((deadline, id))
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child].0 < entries[parent].0 else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() {
        guard !entries.isEmpty else { return }
        entries.swapAt(0, entries.count - 1)
        entries.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < entries.count, entries[left].0 < entries[smallest].0 { smallest = left }
            if right < entries.count, entries[right].0 < entries[smallest].0 { smallest = right }
            guard smallest != parent else { return }
            entries.swapAt(parent, smallest)
            parent = smallest
        }
    }
}

/// Whether a question's asker has moved on, and the answer given before it did.
struct EarlyAnswer<Answer> {
    var returned = false
    var answer: Answer?
}

/// The connections several loops over one listener may hold together.
package final class ConnectionAllowance: Sendable {
    /// The most connections open at once.
    package let limit: Int
    private let open = LockedValue(0)

    /// An allowance of `limit` connections.
    package init(limit: Int) { self.limit = limit }

    /// Counts one more connection, unless the limit is reached.
    func take() -> Bool {
        open.withLock { open in
            guard open < limit else { return false }
            open += 1
            return true
        }
    }

    /// Counts a connection gone.
    func give() { open.withLock { $0 -= 1 } }
}
