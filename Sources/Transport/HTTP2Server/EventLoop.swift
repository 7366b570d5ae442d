import CEpoll
import CNGHTTP2
import ConnectionLoop
import Durations
import Foundation
import HTTP2Support
import Locking

/// How the application answers requests.
enum HandlerKind: Sendable {
    /// Runs as a task on the Swift concurrency pool; the response comes back through the inbox.
    case async(@Sendable (HTTP2Request) async throws -> HTTP2Response)
    /// Runs on the event-loop thread itself; must be quick and must not block.
    case inline(@Sendable (HTTP2Request) -> HTTP2Response)
}

/// Work handed to the event loop from other threads.
enum LoopCommand: Sendable {
    case respond(connectionID: UInt64, streamID: Int32, response: HTTP2Response)
    case shutdown(graceNanoseconds: UInt64)
}

/// The epoll event loop: one thread owns the listener, every connection and every nghttp2 session.
///
/// Thread-safety: everything except `inbox` and `metrics` is touched only on the loop thread (after
/// `run()` starts; before that only by the starting thread). Other threads talk to the loop through
/// `post(_:)`, which appends to `inbox` under its mutex and wakes the loop through the poller while still
/// holding that mutex; the loop closes the poller's wake-up only after marking the inbox closed under the same
/// mutex.
final class EventLoop: @unchecked Sendable {  // see above: loop-thread confinement + `inbox` mutex
    private struct Inbox {
        var commands: [LoopCommand] = []
        var open = true
        var wakePending = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let inbox = LockedValue(Inbox())
    let metrics = LockedValue(HTTP2ServerMetrics())

    let configuration: HTTP2ServerConfiguration
    let handler: HandlerKind
    private let hooks: HTTP2LoopHooks?
    private let tlsContext: TLSContext?
    private let poller: Poller
    private var listenFD: Int32
    private let callbacks: OpaquePointer
    private var connections: [UInt64: Connection] = [:]
    private var nextConnectionID: UInt64 = 1
    private var shutdownDeadline: UInt64?
    private let idleNanoseconds: UInt64
    /// Monotonic time of the current loop iteration, in nanoseconds.
    private(set) var now: UInt64
    /// Scratch space for socket reads.
    let readBuffer: UnsafeMutableRawBufferPointer
    /// Scratch space for decrypted TLS data.
    let plaintextBuffer: UnsafeMutableRawBufferPointer
    /// Scratch space that gathers frames before one TLS write.
    let tlsStaging: UnsafeMutableRawBufferPointer

    private static let listenerTag: UInt64 = 0
    private static let tick: UInt64 = 100_000_000
    /// Set in the epoll tag of a connection's HTTP/1.1 relay socket (the rest is the connection's id).
    private static let relayTagBit: UInt64 = 1 << 62

    init(
        configuration: HTTP2ServerConfiguration, handler: HandlerKind, hooks: HTTP2LoopHooks?,
        tlsContext: TLSContext?, listener: Listener
    ) throws(HTTP2ServerError) {
        guard let callbacks = makeSessionCallbacks() else {
            throw .setupFailed(reason: "nghttp2_session_callbacks_new failed")
        }
        let poller: Poller
        do {
            poller = try Poller(capacity: 256)
        } catch {
            nghttp2_session_callbacks_del(callbacks)
            throw .setupFailed(reason: error.reason)
        }
        guard poller.add(listener.fd, tag: EventLoop.listenerTag, events: EPOLLIN.rawValue) else {
            let reason = String(cString: strerror(errno))
            nghttp2_session_callbacks_del(callbacks)
            throw .setupFailed(reason: "epoll_ctl: \(reason)")
        }
        self.configuration = configuration
        self.handler = handler
        self.hooks = hooks
        self.tlsContext = tlsContext
        self.callbacks = callbacks
        self.poller = poller
        self.listenFD = listener.fd
        self.idleNanoseconds = configuration.idleTimeout.nanosecondsClamped
        self.now = MonotonicTime.nanoseconds()
        readBuffer = .allocate(byteCount: 64 * 1024, alignment: 16)
        plaintextBuffer = .allocate(byteCount: 64 * 1024, alignment: 16)
        tlsStaging = .allocate(byteCount: 64 * 1024, alignment: 16)
    }

    deinit {
        if listenFD >= 0 { close(listenFD) }
        nghttp2_session_callbacks_del(callbacks)
        readBuffer.deallocate()
        plaintextBuffer.deallocate()
        tlsStaging.deallocate()
    }

    // MARK: Cross-thread entry points

    /// Hands `command` to the loop; dropped if the loop has already stopped.
    func post(_ command: LoopCommand) {
        inbox.withLock { inbox in
            guard inbox.open else { return }
            inbox.commands.append(command)
            if !inbox.wakePending {
                inbox.wakePending = true
                poller.wake()
            }
        }
    }

    /// Starts a graceful shutdown and returns once the loop has stopped.
    func shutdown(graceNanoseconds: UInt64) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let running = inbox.withLock { inbox -> Bool in
                guard inbox.open else { return false }
                inbox.waiters.append(continuation)
                return true
            }
            if running {
                post(.shutdown(graceNanoseconds: graceNanoseconds))
            } else {
                continuation.resume()
            }
        }
    }

    // MARK: The loop

    /// Runs until shutdown completes. Call on the dedicated loop thread.
    func run() {
        var lastTimerCheck = MonotonicTime.nanoseconds()
        while true {
            let timeout: Int32 = connections.isEmpty && shutdownDeadline == nil ? -1 : Int32(EventLoop.tick / 1_000_000)
            let count = poller.wait(timeoutMilliseconds: timeout)
            now = MonotonicTime.nanoseconds()
            guard let count else { break }
            let hooks = count > 0 ? hooks : nil
            hooks?.willHandleEvents()
            for index in 0..<count {
                let (tag, events) = poller.ready(index)
                switch tag {
                case EventLoop.listenerTag: acceptConnections()
                case Poller.wakeTag: processInbox()
                case let tag where tag & EventLoop.relayTagBit != 0:
                    if let connection = connections[tag & ~EventLoop.relayTagBit] {
                        handleRelay(connection, events: events)
                    }
                case let tag:
                    if let connection = connections[tag] { handle(connection, events: events) }
                }
            }
            if now &- lastTimerCheck >= EventLoop.tick {
                lastTimerCheck = now
                checkTimers()
            }
            hooks?.didHandleEvents()
            if shutdownDeadline != nil && connections.isEmpty { break }
        }
        finish()
    }

    private func finish() {
        for connection in Array(connections.values) { closeConnection(connection) }
        if listenFD >= 0 {
            close(listenFD)
            listenFD = -1
        }
        let waiters = inbox.withLock { inbox -> [CheckedContinuation<Void, Never>] in
            inbox.open = false
            inbox.commands = []
            defer { inbox.waiters = [] }
            return inbox.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    private func acceptConnections() {
        while listenFD >= 0 {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { accept(listenFD, $0, &length) }
            }
            if fd < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return  // EAGAIN: nothing more; other errors (EMFILE…): retry on the next event
            }
            if !configuration.allowedPeers.isEmpty,
                !configuration.allowedPeers.contains(SocketAddress.host(of: storage))
            {
                close(fd)
                continue
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            var tls: TLSEngine?
            if let tlsContext {
                guard let made = tlsContext.makeConnection() else {
                    close(fd)
                    continue
                }
                tls = made
            }
            let connection = Connection(
                id: nextConnectionID, fd: fd, remoteAddress: SocketAddress.describe(storage), loop: self, tls: tls,
                now: now)
            nextConnectionID += 1
            guard connection.startSession(callbacks: callbacks, configuration: configuration),
                poller.add(fd, tag: connection.id, events: EPOLLIN.rawValue)
            else {
                close(fd)
                continue
            }
            connection.interest = EPOLLIN.rawValue
            connections[connection.id] = connection
            metrics.withLock {
                $0.connectionsAccepted += 1
                $0.connectionsOpen += 1
            }
            connection.flush()
            settle(connection)
        }
    }

    private func handle(_ connection: Connection, events: UInt32) {
        let readable = EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue | EPOLLRDHUP.rawValue
        if events & readable != 0 {
            connection.readFromSocket(now: now)
        }
        connection.flush()
        settle(connection)
    }

    private func handleRelay(_ connection: Connection, events: UInt32) {
        let readable = EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue | EPOLLRDHUP.rawValue
        if events & readable != 0 {
            connection.readFromRelay(now: now)
        }
        connection.flush()
        settle(connection)
    }

    /// Adds a connection's new relay socket to the epoll set (called while the connection is being read).
    func registerRelay(_ connection: Connection) {
        guard let relay = connection.relay else { return }
        if poller.add(relay.fd, tag: connection.id | EventLoop.relayTagBit, events: EPOLLIN.rawValue) {
            relay.interest = EPOLLIN.rawValue
        } else {
            connection.markClose(.socketError)
        }
    }

    /// Closes the connection if it is done, else updates which events it waits for.
    private func settle(_ connection: Connection) {
        if let reason = connection.closeReason {
            if reason.flushesFirst && !connection.output.isEmpty {
                if connection.hardCloseDeadline == nil { connection.hardCloseDeadline = now + 2_000_000_000 }
                setInterest(connection, EPOLLOUT.rawValue)
                detachRelay(connection)
                return
            }
            closeConnection(connection)
            return
        }
        if connection.sessionFinished {
            closeConnection(connection)
            return
        }
        var wanted: UInt32 = 0
        let relayBacklog = connection.relay?.output.count ?? 0
        if connection.output.count < Connection.highWater && relayBacklog < Connection.highWater {
            wanted |= EPOLLIN.rawValue
        }
        if !connection.output.isEmpty { wanted |= EPOLLOUT.rawValue }
        setInterest(connection, wanted)
        if let relay = connection.relay {
            var relayWanted: UInt32 = 0
            if connection.output.count < Connection.highWater { relayWanted |= EPOLLIN.rawValue }
            if !relay.output.isEmpty { relayWanted |= EPOLLOUT.rawValue }
            setRelayInterest(connection, relayWanted)
        }
    }

    /// Closes a connection's relay socket (the connection is closing; a hung-up socket would keep waking the loop).
    private func detachRelay(_ connection: Connection) {
        guard let relay = connection.relay else { return }
        poller.remove(relay.fd)
        close(relay.fd)
        connection.relay = nil
    }

    private func setRelayInterest(_ connection: Connection, _ wanted: UInt32) {
        guard let relay = connection.relay, wanted != relay.interest else { return }
        poller.modify(relay.fd, tag: connection.id | EventLoop.relayTagBit, events: wanted)
        relay.interest = wanted
    }

    private func setInterest(_ connection: Connection, _ wanted: UInt32) {
        guard wanted != connection.interest else { return }
        poller.modify(connection.fd, tag: connection.id, events: wanted)
        connection.interest = wanted
    }

    private func closeConnection(_ connection: Connection) {
        guard connections.removeValue(forKey: connection.id) != nil else { return }
        poller.remove(connection.fd)
        close(connection.fd)
        detachRelay(connection)
        var unfinished = 0
        for stream in connection.streams.values where !stream.responseComplete {
            stream.task?.cancel()
            unfinished += 1
        }
        connection.streams = [:]
        let protocolError = connection.closeReason == .protocolError
        metrics.withLock {
            $0.connectionsOpen -= 1
            $0.streamsReset += unfinished
            if protocolError { $0.protocolErrors += 1 }
        }
    }

    private func processInbox() {
        poller.consumeWake()
        let commands = inbox.withLock { inbox -> [LoopCommand] in
            inbox.wakePending = false
            defer { inbox.commands = [] }
            return inbox.commands
        }
        var touched: [UInt64: Connection] = [:]
        for command in commands {
            switch command {
            case .respond(let connectionID, let streamID, let response):
                guard let connection = connections[connectionID], connection.closeReason == nil,
                    let stream = connection.streams[streamID]
                else { continue }
                connection.submitResponse(stream, response, now: now)
                touched[connectionID] = connection
            case .shutdown(let grace):
                beginShutdown(graceNanoseconds: grace)
            }
        }
        for connection in touched.values where connections[connection.id] != nil {
            connection.flush()
            settle(connection)
        }
    }

    private func beginShutdown(graceNanoseconds: UInt64) {
        guard shutdownDeadline == nil else { return }
        shutdownDeadline = now &+ graceNanoseconds
        if listenFD >= 0 {
            poller.remove(listenFD)
            close(listenFD)
            listenFD = -1
        }
        for connection in Array(connections.values) {
            if connection.sessionReady {
                connection.submitGoAway(HTTP2GoAway())
                connection.flush()
                settle(connection)
            } else {
                connection.markClose(.deadline)
                closeConnection(connection)
            }
        }
    }

    private func checkTimers() {
        for connection in Array(connections.values) {
            if let deadline = shutdownDeadline, now >= deadline {
                connection.markClose(.deadline)
                closeConnection(connection)
                continue
            }
            if let deadline = connection.hardCloseDeadline, now >= deadline {
                connection.markClose(.deadline)
                closeConnection(connection)
                continue
            }
            guard connection.streams.isEmpty, now &- connection.lastActivity >= idleNanoseconds,
                !connection.goAwaySubmitted
            else { continue }
            if connection.sessionReady {
                connection.terminate()
                connection.hardCloseDeadline = now &+ 5_000_000_000
                connection.flush()
                settle(connection)
            } else {
                connection.markClose(.deadline)
                closeConnection(connection)
            }
        }
    }
}
