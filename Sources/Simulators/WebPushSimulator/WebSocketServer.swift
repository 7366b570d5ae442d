import CWebSockets
import Foundation
import Locking

/// What a ``WebSocketServer`` tells its owner, always on its service thread.
struct WebSocketHandlers: Sendable {
    /// A client finished the opening handshake; its connection id.
    var opened: @Sendable (UInt64) -> Void
    /// A whole text message arrived on a connection.
    var received: @Sendable (UInt64, String) -> Void
    /// A connection ended (either side closed it, or the server stopped).
    var closed: @Sendable (UInt64) -> Void
}

/// Why a ``WebSocketServer`` could not start.
struct WebSocketServerError: Error, CustomStringConvertible {
    /// What went wrong.
    var description: String
}

/// A plain-`ws` WebSocket listener on libwebsockets: one protocol, text frames, a service loop on a thread of
/// its own.
///
/// Only the service thread touches libwebsockets' connections. Other threads queue frames with
/// ``send(_:to:)`` or ask for a close with ``close(_:status:)``; both wake the loop with `lws_cancel_service`,
/// whose callback asks to write on every connection with something queued.
final class WebSocketServer: Sendable {
    private struct Connection: Sendable {
        /// The `struct lws *`'s address; turned back into a pointer on the service thread only.
        var handle: UInt
        var outbox: [String] = []
        var closeStatus: Int32?
        var incoming: [UInt8] = []
    }

    private struct Shared: Sendable {
        var nextID: UInt64 = 1
        var connections: [UInt64: Connection] = [:]
        var stopRequested = false
        /// Set once the context is destroyed: nothing may wake it any more.
        var destroyed = false
        var stopped = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    /// The libwebsockets context and what it points into.
    private final class Context: @unchecked Sendable {  // `lws_cancel_service` is thread-safe; the rest runs on the
        // service thread, and `destroy()` happens only after `Shared.destroyed` is set under `shared`'s lock.
        let server: UnsafeMutablePointer<cws_server>
        init(_ server: UnsafeMutablePointer<cws_server>) { self.server = server }
    }

    /// The largest message accepted; a longer one closes the connection with 1009.
    static let messageLimit = 64 * 1024

    private let handlers: WebSocketHandlers
    private let shared = LockedValue(Shared())
    private let context = LockedValue<Context?>(nil)
    /// The port listened on (`0` before ``start(host:port:protocolName:)``).
    let port: LockedValue<Int> = LockedValue(0)

    init(handlers: WebSocketHandlers) {
        self.handlers = handlers
    }

    /// Listens on `host`:`port` (`0` picks one) for WebSocket clients of `protocolName` (also the protocol of
    /// clients that name none) and starts the service thread.
    func start(host: String, port requestedPort: Int, protocolName: String) throws(WebSocketServerError) {
        cws_quiet_logging()
        let created = cws_server_create(
            host, Int32(requestedPort), protocolName,
            { wsi, reason, user, input, length in
                guard let wsi, let owner = cws_context_user(wsi) else { return 0 }
                let server = Unmanaged<WebSocketServer>.fromOpaque(owner).takeUnretainedValue()
                return server.callback(wsi, reason, user, input, length)
            }, Unmanaged.passUnretained(self).toOpaque(), MemoryLayout<UInt64>.size, 4096)
        guard let created else {
            throw WebSocketServerError(description: "cannot listen on \(host):\(requestedPort)")
        }
        let handle = Context(created)
        context.withLock { $0 = handle }
        port.withLock { $0 = Int(cws_server_port(created)) }
        Thread.start(named: "websockets") { [self] in serve(handle) }
    }

    /// Queues a text frame for connection `id`; `false` if it is gone.
    @discardableResult
    func send(_ text: String, to id: UInt64) -> Bool {
        shared.withLock { shared in
            guard !shared.destroyed, shared.connections[id] != nil, shared.connections[id]?.closeStatus == nil else {
                return false
            }
            shared.connections[id]?.outbox.append(text)
            wake()
            return true
        }
    }

    /// Closes connection `id` with `status` once what is queued for it is written.
    func close(_ id: UInt64, status: Int32 = 1000) {
        shared.withLock { shared in
            guard !shared.destroyed, shared.connections[id] != nil else { return }
            shared.connections[id]?.closeStatus = status
            wake()
        }
    }

    /// Open connections.
    var connectionCount: Int { shared.withLock { $0.connections.count } }

    /// Stops listening, closes every connection and waits for the service thread to end.
    func shutdown() async {
        let started = context.withLock { $0 != nil }
        guard started else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            shared.withLock { shared in
                if shared.stopped {
                    continuation.resume()
                    return
                }
                shared.waiters.append(continuation)
                shared.stopRequested = true
                wake()
            }
        }
    }

    /// Wakes the service loop; the caller holds `shared`'s lock and has checked `destroyed`.
    private func wake() {
        guard let handle = context.withLock({ $0 }) else { return }
        lws_cancel_service(handle.server.pointee.context)
    }

    private func serve(_ handle: Context) {
        while !shared.withLock({ $0.stopRequested }) {
            _ = lws_service(handle.server.pointee.context, 0)
        }
        shared.withLock { $0.destroyed = true }
        cws_server_destroy(handle.server)
        let waiters = shared.withLock { shared in
            shared.stopped = true
            shared.connections = [:]
            defer { shared.waiters = [] }
            return shared.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    // MARK: The service thread

    private func callback(
        _ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
        _ input: UnsafeMutableRawPointer?, _ length: Int
    ) -> Int32 {
        switch reason {
        case LWS_CALLBACK_ESTABLISHED:
            guard let user else { return -1 }
            let id = shared.withLock { shared in
                let id = shared.nextID
                shared.nextID += 1
                shared.connections[id] = Connection(handle: UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(wsi))))
                return id
            }
            user.storeBytes(of: id, as: UInt64.self)
            handlers.opened(id)
            return 0
        case LWS_CALLBACK_RECEIVE:
            guard let user else { return -1 }
            return receive(wsi, id: user.load(as: UInt64.self), input, length)
        case LWS_CALLBACK_SERVER_WRITEABLE:
            guard let user else { return -1 }
            return writable(wsi, id: user.load(as: UInt64.self))
        case LWS_CALLBACK_CLOSED:
            guard let user else { return 0 }
            let id = user.load(as: UInt64.self)
            let known = shared.withLock { $0.connections.removeValue(forKey: id) != nil }
            if known { handlers.closed(id) }
            return 0
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            let handles = shared.withLock { shared in
                shared.connections.values.filter { !$0.outbox.isEmpty || $0.closeStatus != nil }.map(\.handle)
            }
            for handle in handles {
                if let pointer = OpaquePointer(bitPattern: handle) { lws_callback_on_writable(pointer) }
            }
            return 0
        default:
            return lws_callback_http_dummy(wsi, reason, user, input, length)
        }
    }

    private func receive(_ wsi: OpaquePointer, id: UInt64, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        if cws_is_binary(wsi) != 0 {
            cws_close_with_status(wsi, 1003)
            return -1
        }
        let bytes = input.map { Array(UnsafeRawBufferPointer(start: $0, count: length)) } ?? []
        let final = cws_is_final_fragment(wsi) != 0
        let message = shared.withLock { shared -> [UInt8]?? in
            guard var connection = shared.connections[id] else { return .some(nil) }
            connection.incoming += bytes
            guard connection.incoming.count <= Self.messageLimit else { return nil }
            defer { shared.connections[id] = connection }
            guard final else { return .some(nil) }
            defer { connection.incoming = [] }
            return .some(connection.incoming)
        }
        switch message {
        case .none:
            cws_close_with_status(wsi, 1009)
            return -1
        case .some(.none):
            return 0
        case .some(.some(let complete)):
            guard let text = String(validating: complete, as: UTF8.self) else {
                cws_close_with_status(wsi, 1007)
                return -1
            }
            handlers.received(id, text)
            return 0
        }
    }

    private func writable(_ wsi: OpaquePointer, id: UInt64) -> Int32 {
        let next = shared.withLock { shared -> (text: String?, more: Bool, close: Int32?) in
            guard var connection = shared.connections[id] else { return (nil, false, 1000) }
            let text = connection.outbox.isEmpty ? nil : connection.outbox.removeFirst()
            shared.connections[id] = connection
            return (text, !connection.outbox.isEmpty, connection.outbox.isEmpty ? connection.closeStatus : nil)
        }
        if let text = next.text {
            let written = Array(text.utf8).withUnsafeBufferPointer { cws_write_text(wsi, $0.baseAddress, $0.count) }
            guard written != 0 else { return -1 }
        }
        if let status = next.close {
            cws_close_with_status(wsi, status)
            return -1
        }
        if next.more { lws_callback_on_writable(wsi) }
        return 0
    }
}
