import CMicroHTTPD
import Foundation
import Locking

/// One Server-Sent Events stream to one client.
///
/// A handler creates a stream, registers it where publishers can find it, sets `onTermination`
/// to unregister it, and returns `HTTPResponse.eventStream(stream)`. Publishers call
/// `send(event:id:data:)` from any thread or task; events sent before the client is attached are
/// buffered. The stream ends when either side closes it; `onTermination` then runs exactly once.
///
/// A stream created with an ``EventStreamBatch`` defers waking its connection while a batch scope is
/// open, so a burst of sends to many streams wakes the server's workers once instead of once per event.
public final class EventStream: Sendable {
    private struct State: ~Copyable {
        /// Starts with a comment so the client gets the response headers and a first chunk at once.
        var pending: [UInt8] = Array(": stream opened\n\n".utf8)
        var readOffset = 0
        /// No more events are accepted; the body ends once `pending` is drained.
        var closed = false
        /// The connection is gone (or never came); `onTermination` has run or is about to.
        var terminated = false
        /// The content reader suspended the connection and nobody has resumed it yet.
        var suspended = false
        /// The stream is suspended, has bytes to send and waits in its batch for the wake-up.
        var marked = false
        /// The MHD connection serving this stream, once the response is queued.
        var connection: MHDConnection?
        /// A batch wake-up took this stream's suspension and calls `MHD_resume_connection` outside the
        /// mutex; `close()` waits until that call has returned.
        var resumingOutsideLock = false
        var terminationHandlers: [@Sendable () -> Void] = []

        var pendingCount: Int { pending.count - readOffset }
    }

    // Every field is guarded by this mutex. MHD_suspend_connection is called while it is held, and so is
    // MHD_resume_connection, except for a batch wake-up (`wakeMarked()`): that one clears `suspended`
    // under the mutex and resumes right after releasing it (the connection stays suspended in between,
    // so no new suspend can happen), and `close()` does not return before that resume was issued.
    private let state = LockedValue(State())

    /// The most bytes buffered for a slow client before the stream is closed.
    public let bufferLimit: Int
    /// Where wake-ups are deferred while a batch scope is open; `nil` wakes at once.
    private let batch: EventStreamBatch?

    /// Creates a stream that buffers at most `bufferLimit` bytes for a slow client. With `batch`, sends
    /// made while one of its scopes is open wake the connection when the scope ends.
    public init(bufferLimit: Int = 1 << 20, batch: EventStreamBatch? = nil) {
        self.bufferLimit = bufferLimit
        self.batch = batch
    }

    /// Whether the stream no longer accepts events.
    public var isClosed: Bool { state.withLock { $0.closed } }

    /// Registers `handler` to run once when the stream ends (client gone, `close()`, server shutdown).
    /// Runs it at once if the stream has already ended. Handlers run on a server thread: keep them short.
    public func onTermination(_ handler: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state -> Bool in
            if state.terminated { return true }
            state.terminationHandlers.append(handler)
            return false
        }
        if runNow { handler() }
    }

    /// Sends one event. `data` may span lines (each becomes a `data:` line). Returns `false` when the
    /// stream is closed. A client that lets more than `bufferLimit` bytes pile up is disconnected.
    @discardableResult
    public func send(event: String? = nil, id: String? = nil, data: String) -> Bool {
        if Self.isSingleLine(data), event.map(Self.isSingleLine) ?? true, id.map(Self.isSingleLine) ?? true {
            // Every field one line without carriage returns (the usual case): "event: <event>\nid: <id>\ndata:
            // <data>\n\n", each present field appended as bytes, with no intermediate string.
            let count =
                data.utf8.count + 8 + (event.map { $0.utf8.count + 8 } ?? 0) + (id.map { $0.utf8.count + 5 } ?? 0)
            return enqueue(count: count) { pending in
                if let event {
                    pending.append(contentsOf: "event: ".utf8)
                    pending.append(contentsOf: event.utf8)
                    pending.append(0x0A)
                }
                if let id {
                    pending.append(contentsOf: "id: ".utf8)
                    pending.append(contentsOf: id.utf8)
                    pending.append(0x0A)
                }
                pending.append(contentsOf: "data: ".utf8)
                pending.append(contentsOf: data.utf8)
                pending.append(contentsOf: "\n\n".utf8)
            }
        }
        var text = ""
        if let event { text += "event: \(Self.singleLine(event))\n" }
        if let id { text += "id: \(Self.singleLine(id))\n" }
        let lines = data.split(separator: "\n", omittingEmptySubsequences: false)
        for line in lines { text += "data: \(line.replacingOccurrences(of: "\r", with: ""))\n" }
        text += "\n"
        return enqueue(Array(text.utf8))
    }

    /// Whether `text` holds no line feed and no carriage return, read in place when stored contiguously.
    private static func isSingleLine(_ text: String) -> Bool {
        let check = { (bytes: UnsafeBufferPointer<UInt8>) -> Bool in
            for byte in bytes where byte == 0x0A || byte == 0x0D { return false }
            return true
        }
        return text.utf8.withContiguousStorageIfAvailable(check) ?? !text.utf8.contains { $0 == 0x0A || $0 == 0x0D }
    }

    /// Sends a comment line (`: text`), which clients ignore; used for heartbeats.
    @discardableResult
    public func sendComment(_ text: String) -> Bool {
        enqueue(Array(": \(Self.singleLine(text))\n\n".utf8))
    }

    /// Ends the stream after the already-queued events have been delivered.
    public func close() {
        var waitForResume = state.withLock { state -> Bool in
            if !state.closed {
                state.closed = true
                Self.resumeIfSuspended(&state)
            }
            return state.resumingOutsideLock
        }
        // Every resume of this stream's connection must be issued before `close()` returns (the server
        // stops the daemon once every stream is closed); a batch wake-up is at most a system call away.
        while waitForResume {
            sched_yield()
            waitForResume = state.withLock { $0.resumingOutsideLock }
        }
    }

    private enum Enqueued {
        case refused
        case queued
        /// Queued for a suspended connection: the batch (if a scope is open) or the caller wakes it.
        case queuedToMark
    }

    private func enqueue(_ bytes: [UInt8]) -> Bool {
        enqueue(count: bytes.count) { $0.append(contentsOf: bytes) }
    }

    /// Queues `count` bytes, which `write` appends to the pending buffer (under the mutex).
    private func enqueue(count: Int, write: (inout [UInt8]) -> Void) -> Bool {
        let batched = batch != nil
        let result = state.withLock { state -> Enqueued in
            guard !state.closed else { return .refused }
            if state.pendingCount + count > bufferLimit {
                state.closed = true
                state.pending = []
                state.readOffset = 0
                Self.resumeIfSuspended(&state)
                return .refused
            }
            write(&state.pending)
            guard state.suspended, state.connection != nil else { return .queued }
            guard batched else {
                Self.resumeIfSuspended(&state)
                return .queued
            }
            if state.marked { return .queued }
            state.marked = true
            return .queuedToMark
        }
        switch result {
        case .refused: return false
        case .queued: return true
        case .queuedToMark:
            if batch?.mark(self) != true { wakeMarked() }
            return true
        }
    }

    /// Wakes the connection of a marked stream (end of a batch scope, or no scope was open).
    /// The mutex is released before `MHD_resume_connection`, so the worker thread that the resume wakes
    /// does not find it held when it reads the stream.
    func wakeMarked() {
        let connection = state.withLock { state -> MHDConnection? in
            guard state.marked else { return nil }
            state.marked = false
            guard state.suspended, let connection = state.connection else { return nil }
            state.suspended = false
            state.resumingOutsideLock = true
            return connection
        }
        guard let connection else { return }
        MHD_resume_connection(connection.pointer)
        state.withLock { $0.resumingOutsideLock = false }
    }

    private static func resumeIfSuspended(_ state: inout State) {
        state.marked = false
        guard state.suspended, let connection = state.connection else { return }
        state.suspended = false
        MHD_resume_connection(connection.pointer)
    }

    private static func singleLine(_ text: String) -> String {
        text.replacingOccurrences(of: "\n", with: " ").replacingOccurrences(of: "\r", with: " ")
    }

    // MARK: Server side

    /// Binds the stream to the connection its response was queued on.
    func attach(connection: MHDConnection) {
        state.withLock { $0.connection = connection }
    }

    /// The content-reader step: copies pending bytes into `buffer`, or suspends the connection and
    /// returns 0 when there is nothing to send, or returns -1 at the end of the stream.
    func read(into buffer: UnsafeMutablePointer<CChar>, capacity: Int) -> Int {
        state.withLock { state -> Int in
            let available = state.pendingCount
            if available > 0 {
                let count = min(available, capacity)
                state.pending.withUnsafeBufferPointer { source in
                    UnsafeMutableRawPointer(buffer).copyMemory(
                        from: source.baseAddress! + state.readOffset, byteCount: count)
                }
                state.readOffset += count
                if state.readOffset == state.pending.count {
                    state.pending.removeAll(keepingCapacity: state.pending.count <= 64 * 1024)
                    state.readOffset = 0
                } else if state.readOffset > 64 * 1024 {
                    state.pending.removeFirst(state.readOffset)
                    state.readOffset = 0
                }
                return count
            }
            if state.closed || state.terminated { return -1 }
            guard let connection = state.connection else { return -1 }
            state.suspended = true
            MHD_suspend_connection(connection.pointer)
            return 0
        }
    }

    /// Marks the stream finished (the response was released) and runs the termination handlers once.
    func terminate() {
        let handlers = state.withLock { state -> [@Sendable () -> Void] in
            guard !state.terminated else { return [] }
            state.terminated = true
            state.closed = true
            state.suspended = false
            state.marked = false
            state.connection = nil
            state.pending = []
            state.readOffset = 0
            let handlers = state.terminationHandlers
            state.terminationHandlers = []
            return handlers
        }
        for handler in handlers { handler() }
    }
}
