import CNGHTTP2
import ConnectionLoop
import Durations
import Foundation
import HTTP2Support
import Locking
import Synchronization

/// The I/O thread of one ``HTTP2Client``: an epoll loop that owns the connections, their nghttp2 sessions and
/// every admitted request.
///
/// Thread-safety: other threads touch only `inbox` (a mutex; a post wakes the loop through the poller while
/// holding it, and the loop closes the poller's wake-up only after marking the inbox closed under the same
/// mutex), the atomics, and `PendingRequest.cancelled`. Everything else is confined to the I/O thread.
final class ClientLoop: @unchecked Sendable {  // see above: I/O-thread confinement + `inbox` mutex
    private struct Inbox {
        var submitted: [PendingRequest] = []
        var cancelled: [PendingRequest] = []
        var open = true
        var shuttingDown = false
        var wakePending = false
    }

    let configuration: HTTP2Client.Configuration
    let connectionsOpened = Atomic<Int>(0)
    let maximumInFlight = Atomic<Int>(0)

    private let inbox = LockedValue(Inbox())
    private let exited = DispatchGroup()
    private let loopThread = LockedValue<pthread_t?>(nil)
    private let origin: Result<Origin, HTTPClientError>
    /// The epoll set connections register their sockets in (tagged with their ids).
    let poller: Poller
    let callbacks: OpaquePointer

    /// Requests waiting for a stream, oldest first (`queueHead` marks the first live one).
    private var queue: [PendingRequest] = []
    private var queueHead = 0
    /// The connection new streams open on.
    private var current: ClientConnection?
    /// Every open connection by epoll tag: the current one and those finishing after GOAWAY.
    private var connections: [UInt64: ClientConnection] = [:]
    private var nextConnectionID: UInt64 = 1
    private var tlsContext: ClientTLSContext?
    private var nextTimerCheck: UInt64 = 0
    /// Monotonic time of the current loop iteration, in nanoseconds.
    private(set) var now: UInt64
    /// Scratch space for socket reads and decrypted TLS data.
    let readBuffer: UnsafeMutableRawBufferPointer
    let plaintextBuffer: UnsafeMutableRawBufferPointer
    /// Scratch space that gathers frames before one TLS write.
    let staging: UnsafeMutableRawBufferPointer

    private static let tick: UInt64 = 50_000_000

    init(configuration: HTTP2Client.Configuration) {
        self.configuration = configuration
        do throws(HTTPClientError) {
            origin = .success(try Origin(url: configuration.baseURL))
        } catch {
            origin = .failure(error)
        }
        guard let callbacks = makeClientCallbacks() else { fatalError("nghttp2_session_callbacks_new: out of memory") }
        self.callbacks = callbacks
        do {
            poller = try Poller(capacity: 64)
        } catch {
            fatalError(error.reason)
        }
        now = MonotonicTime.nanoseconds()
        readBuffer = .allocate(byteCount: 64 * 1024, alignment: 16)
        plaintextBuffer = .allocate(byteCount: 64 * 1024, alignment: 16)
        staging = .allocate(byteCount: 64 * 1024, alignment: 16)
    }

    deinit {
        nghttp2_session_callbacks_del(callbacks)
        readBuffer.deallocate()
        plaintextBuffer.deallocate()
        staging.deallocate()
    }

    /// Starts the I/O thread; it keeps the loop alive until shutdown.
    func start() {
        exited.enter()
        Thread.start(named: "HTTP2Client I/O") { [self] in
            loopThread.withLock { $0 = pthread_self() }
            run()
            exited.leave()
        }
    }

    // MARK: - Any thread

    func submit(_ request: PendingRequest) {
        let accepted = inbox.withLock { inbox -> Bool in
            guard inbox.open, !inbox.shuttingDown else { return false }
            inbox.submitted.append(request)
            wake(&inbox)
            return true
        }
        if !accepted { request.finish(.failure(.shutdown)) }
    }

    func cancel(_ request: PendingRequest) {
        request.cancelled.store(true, ordering: .sequentiallyConsistent)
        inbox.withLock { inbox in
            guard inbox.open else { return }
            inbox.cancelled.append(request)
            wake(&inbox)
        }
    }

    func shutdown() {
        inbox.withLock { inbox in
            guard inbox.open, !inbox.shuttingDown else { return }
            inbox.shuttingDown = true
            wake(&inbox)
        }
        let onLoopThread = loopThread.withLock { thread in thread.map { pthread_equal($0, pthread_self()) != 0 } }
        if onLoopThread != true { exited.wait() }
    }

    private func wake(_ inbox: inout Inbox) {
        guard !inbox.wakePending else { return }
        inbox.wakePending = true
        poller.wake()
    }

    // MARK: - The loop

    private func run() {
        while true {
            // Deadlines exist only for queued requests, open streams and connections still opening: an idle
            // connection costs no wake-ups.
            let busy = queueHead < queue.count || connections.values.contains { $0.isOpening || $0.streamCount > 0 }
            let count = poller.wait(timeoutMilliseconds: busy ? Int32(ClientLoop.tick / 1_000_000) : -1)
            now = MonotonicTime.nanoseconds()
            guard let count else { break }
            var shuttingDown = false
            for index in 0..<count {
                let (tag, events) = poller.ready(index)
                if tag == Poller.wakeTag {
                    shuttingDown = processInbox() || shuttingDown
                } else if let connection = connections[tag] {
                    connection.handle(events: events)
                }
            }
            if shuttingDown { break }
            if now >= nextTimerCheck {
                nextTimerCheck = now &+ ClientLoop.tick
                checkDeadlines()
            }
            // Settle first, so a connection that failed before becoming usable fails the queue instead of
            // being replaced by another attempt; then open streams and send them.
            for connection in Array(connections.values) { settle(connection) }
            pump()
            for connection in Array(connections.values) { settle(connection) }
        }
        finish()
    }

    /// Takes new and cancelled requests from the inbox; returns whether shutdown was asked for.
    private func processInbox() -> Bool {
        poller.consumeWake()
        let (submitted, cancelled, shuttingDown) = inbox.withLock { inbox in
            inbox.wakePending = false
            defer {
                inbox.submitted.removeAll(keepingCapacity: true)
                inbox.cancelled.removeAll(keepingCapacity: true)
            }
            return (inbox.submitted, inbox.cancelled, inbox.shuttingDown)
        }
        for request in submitted { admit(request) }
        for request in cancelled where !request.isFinished { abort(request, with: .cancelled) }
        return shuttingDown
    }

    private func admit(_ request: PendingRequest) {
        if request.cancelled.load(ordering: .sequentiallyConsistent) {
            request.finish(.failure(.cancelled))
            return
        }
        guard case .success = origin else {
            if case .failure(let error) = origin { request.finish(.failure(error)) }
            return
        }
        if let problem = RequestValidation.problem(in: request.request) {
            request.finish(.failure(.invalidRequest(problem)))
            return
        }
        request.deadline = now &+ request.timeoutNanoseconds
        queue.append(request)
    }

    /// Puts a request the server refused unprocessed back at the front of the queue.
    func requeue(_ request: PendingRequest) {
        request.resetForRetry()
        if queueHead > 0 {
            queueHead -= 1
            queue[queueHead] = request
        } else {
            queue.insert(request, at: 0)
        }
    }

    /// Ends `request` with `error`, resetting its stream when it has one.
    private func abort(_ request: PendingRequest, with error: HTTPClientError) {
        if request.streamID > 0 {
            for connection in connections.values where connection.cancelStream(of: request) { break }
        }
        request.finish(.failure(error))
    }

    /// Opens streams for queued requests while the current connection has room; opens a connection when needed.
    private func pump() {
        while queueHead < queue.count, queue[queueHead].isFinished { queueHead += 1 }
        if queueHead >= queue.count {
            queue.removeAll(keepingCapacity: queue.capacity <= 4096)
            queueHead = 0
            return
        }
        if current == nil || current?.acceptsNewStreams == false && current?.isOpening == false {
            openConnection()
        }
        guard let connection = current, connection.acceptsNewStreams else { return }
        var opened = false
        while queueHead < queue.count, connection.hasRoomForStream {
            let request = queue[queueHead]
            queueHead += 1
            if request.isFinished { continue }
            request.attempts += 1
            connection.openStream(for: request)
            opened = true
        }
        if opened {
            let inFlight = connection.streamCount
            if inFlight > maximumInFlight.load(ordering: .relaxed) {
                maximumInFlight.store(inFlight, ordering: .relaxed)
            }
        }
    }

    private func openConnection() {
        guard case .success(let origin) = origin else { return }
        if let current, current.streamCount == 0, !current.isClosed { current.close() }
        current = nil
        if origin.isTLS && tlsContext == nil {
            do throws(HTTPClientError) {
                tlsContext = try ClientTLSContext(configuration.tls)
            } catch {
                failQueue(with: error)
                return
            }
        }
        let connection = ClientConnection(
            id: nextConnectionID, origin: origin, loop: self, tlsContext: origin.isTLS ? tlsContext : nil,
            connectDeadline: now &+ configuration.connectTimeout.nanosecondsClamped)
        nextConnectionID += 1
        connectionsOpened.add(1, ordering: .relaxed)
        current = connection
        connections[connection.id] = connection
        connection.start()
    }

    /// Fails every queued request (the connection meant for them could not be made).
    private func failQueue(with error: HTTPClientError) {
        for request in queue[queueHead...] { request.finish(.failure(error)) }
        queue.removeAll(keepingCapacity: true)
        queueHead = 0
    }

    /// Flushes `connection` and closes it when it is done, or updates which events it waits for.
    private func settle(_ connection: ClientConnection) {
        connection.flush()
        if connection.isClosed || connection.isDone {
            if let failure = connection.failure, !connection.becameReady, current === connection {
                // It never became usable: the queued requests would only wait for the same outcome.
                failQueue(with: failure)
            }
            if !connection.isClosed { connection.close() }
            connections[connection.id] = nil
            if current === connection { current = nil }
            return
        }
        connection.updateInterest()
    }

    private func checkDeadlines() {
        var index = queueHead
        while index < queue.count {
            let request = queue[index]
            if !request.isFinished && now >= request.deadline { request.finish(.failure(.timeout)) }
            index += 1
        }
        for connection in connections.values { connection.checkDeadlines(now: now) }
    }

    private func finish() {
        for connection in Array(connections.values) {
            connection.fail(.shutdown)
            connection.close()
        }
        connections = [:]
        current = nil
        failQueue(with: .shutdown)
        let leftovers = inbox.withLock { inbox -> [PendingRequest] in
            inbox.open = false
            defer { inbox.submitted = [] }
            return inbox.submitted
        }
        for request in leftovers { request.finish(.failure(.shutdown)) }
    }
}
