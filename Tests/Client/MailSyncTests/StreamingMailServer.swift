import Foundation
import Locking
import MailSync
import TestSupport

/// ``FakeMailServer`` with an event stream the test drives: it records each opening's `Last-Event-ID`, refuses
/// openings on request, announces changes on the open stream, and tells when the client has read them all.
final class StreamingMailServer: ChangeStreamTransport {
    typealias Sink = AsyncThrowingStream<ChangeNotice, any Error>.Continuation

    private struct State {
        var openings: [String?] = []
        var refusals: [MailSyncError] = []
        var sink: Sink?
        var closedStreams = 0
        /// Counts openings, so a read of an older stream is not taken for one of the open stream.
        var streamID = 0
        /// Notices announced on the open stream, and reads of it the client has begun.
        var announced = 0
        var reads = 0
    }

    let server: FakeMailServer
    private let state = LockedValue(State())

    init(_ server: FakeMailServer = FakeMailServer()) { self.server = server }

    /// The `Last-Event-ID` of each opening, in order (`nil`: none sent).
    var openings: [String?] { state.withLock { $0.openings } }
    /// How many streams the client has closed (cancelled) or the server has ended.
    var closedStreams: Int { state.withLock { $0.closedStreams } }
    /// Whether a stream is open.
    var isOpen: Bool { state.withLock { $0.sink != nil } }
    /// Whether the client has handled every notice announced on the open stream and waits for the next: it reads
    /// the next notice only once it is done with the one before.
    var hasReadEveryNotice: Bool { state.withLock { $0.sink != nil && $0.reads > $0.announced } }

    /// The next openings fail with these errors, in order.
    func refuse(_ errors: MailSyncError...) { state.withLock { $0.refusals += errors } }

    /// Delivers a message and announces the new state on the open stream.
    func deliverAndAnnounce() {
        server.deliver()
        announce(.changed(state: server.currentState))
    }

    /// Sends `notice` on the open stream.
    func announce(_ notice: ChangeNotice) {
        let sink = state.withLock { state -> Sink? in
            if state.sink != nil { state.announced += 1 }
            return state.sink
        }
        _ = sink?.yield(notice)
    }

    /// Ends the open stream: cleanly, or with `error`.
    func endStream(throwing error: (any Error)? = nil) {
        let sink = state.withLock { state -> Sink? in
            defer { state.sink = nil }
            return state.sink
        }
        sink?.finish(throwing: error)
    }

    func openChangeStream(
        lastEventID: String?, pingInterval: Duration
    ) async throws -> AsyncThrowingStream<ChangeNotice, any Error> {
        let (stream, sink) = AsyncThrowingStream.makeStream(of: ChangeNotice.self)
        let opened = state.withLock { state -> Result<Int, MailSyncError> in
            state.openings.append(lastEventID)
            guard state.refusals.isEmpty else { return .failure(state.refusals.removeFirst()) }
            state.sink = sink
            state.streamID += 1
            state.announced = 0
            state.reads = 0
            return .success(state.streamID)
        }
        let id = try opened.get()
        sink.onTermination = { [weak self] _ in self?.state.withLock { $0.closedStreams += 1 } }
        // The client's reads go through a counter: each read it begins is counted before it waits.
        let reader = NoticeReader(stream)
        return AsyncThrowingStream { [weak self] in
            self?.state.withLock { state in
                if state.streamID == id { state.reads += 1 }
            }
            return try await reader.next()
        }
    }

    // MARK: - MailTransport

    func fetchChanges(since state: String, max: Int) async throws -> MessageChanges {
        try await server.fetchChanges(since: state, max: max)
    }

    func fetchAllMessages(cursor: String?, limit: Int) async throws -> MessagePage {
        try await server.fetchAllMessages(cursor: cursor, limit: limit)
    }

    func fetchMessage(id: String) async throws -> MailMessage { try await server.fetchMessage(id: id) }

    func updateMessage(id: String, _ update: MessageUpdate) async throws -> MailMessage {
        try await server.updateMessage(id: id, update)
    }

    func deleteMessage(id: String) async throws { try await server.deleteMessage(id: id) }
}

/// The notices of one opened stream, read by its one consumer, one read at a time.
private final class NoticeReader: @unchecked Sendable {  // `next()` is only called by the stream's one consumer
    private var iterator: AsyncThrowingStream<ChangeNotice, any Error>.AsyncIterator

    init(_ stream: AsyncThrowingStream<ChangeNotice, any Error>) { iterator = stream.makeAsyncIterator() }

    func next() async throws -> ChangeNotice? { try await iterator.next() }
}

/// Collects a ``LiveSync``'s events in the background.
final class LiveEventRecorder: Sendable {
    private let recorded = LockedValue<[LiveSyncEvent]>([])
    private let task: Task<Void, Never>

    init(_ live: LiveSync) {
        let events = recorded
        task = Task {
            for await event in live.events { events.withLock { $0.append(event) } }
        }
    }

    deinit { task.cancel() }

    var events: [LiveSyncEvent] { recorded.withLock { $0 } }

    var connections: Int { events.filter { $0 == .connected }.count }

    /// Waits until `predicate` holds on the events.
    func wait(_ predicate: ([LiveSyncEvent]) -> Bool) async -> Bool {
        await eventually { predicate(events) }
    }
}
