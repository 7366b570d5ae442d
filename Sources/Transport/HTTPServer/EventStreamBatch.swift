import Locking

/// Coalesces the wake-ups of event-stream connections over a burst of sends.
///
/// Waking a waiting stream's connection signals the server's worker thread, which then scans its
/// waiting connections. Inside a batch (between `begin()` and `end()`, from any thread), sending to a
/// waiting stream only marks it; when the last open batch ends, every marked connection is woken in one
/// pass, in the order the streams were marked. Outside a batch, a send wakes its connection at once.
///
/// ```swift
/// let batch = EventStreamBatch()
/// let stream = EventStream(batch: batch)   // in the subscribe handler
/// batch.run {
///     for event in burst { stream.send(data: event) }
/// }   // one wake-up for the whole burst
/// ```
///
/// Events are never lost or reordered by batching; they are delivered once the batch ends. Closing a
/// stream (`EventStream.close()`) always wakes its connection at once.
public final class EventStreamBatch: Sendable {
    private struct State: ~Copyable {
        var depth = 0
        var marked: [EventStream] = []
    }

    private let state = LockedValue(State())

    /// Creates a batch with no open scope.
    public init() {}

    /// Opens a batch scope; scopes nest and may be opened from several threads.
    public func begin() {
        state.withLock { $0.depth += 1 }
    }

    /// Closes a scope opened by `begin()`; when none is left open, wakes every marked stream.
    public func end() {
        let due = state.withLock { state -> [EventStream] in
            guard state.depth > 0 else { return [] }
            state.depth -= 1
            guard state.depth == 0, !state.marked.isEmpty else { return [] }
            let due = state.marked
            state.marked = []
            state.marked.reserveCapacity(due.count)
            return due
        }
        for stream in due { stream.wakeMarked() }
    }

    /// Runs `body` inside a batch scope.
    public func run<Result>(_ body: () throws -> Result) rethrows -> Result {
        begin()
        defer { end() }
        return try body()
    }

    /// Whether a scope is open (for tests and diagnostics).
    public var isOpen: Bool { state.withLock { $0.depth > 0 } }

    /// Records `stream` for the wake-up at the end of the open scope; `false` when no scope is open
    /// (the caller then wakes the stream itself).
    func mark(_ stream: EventStream) -> Bool {
        state.withLock { state in
            guard state.depth > 0 else { return false }
            state.marked.append(stream)
            return true
        }
    }
}
