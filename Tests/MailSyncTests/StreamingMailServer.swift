import Foundation
import Locking
import MailSync

/// ``FakeMailServer`` with an event stream the test drives: it records each opening's `Last-Event-ID`, refuses
/// openings on request, and announces changes on the open stream.
final class StreamingMailServer: ChangeStreamTransport {
    typealias Sink = AsyncThrowingStream<ChangeNotice, any Error>.Continuation

    private struct State {
        var openings: [String?] = []
        var refusals: [MailSyncError] = []
        var sink: Sink?
        var closedStreams = 0
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

    /// The next openings fail with these errors, in order.
    func refuse(_ errors: MailSyncError...) { state.withLock { $0.refusals += errors } }

    /// Delivers a message and announces the new state on the open stream.
    func deliverAndAnnounce() {
        server.deliver()
        announce(.changed(state: server.currentState))
    }

    /// Sends `notice` on the open stream.
    func announce(_ notice: ChangeNotice) { _ = state.withLock { $0.sink }?.yield(notice) }

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
        let refusal = state.withLock { state -> MailSyncError? in
            state.openings.append(lastEventID)
            guard state.refusals.isEmpty else { return state.refusals.removeFirst() }
            state.sink = sink
            return nil
        }
        if let refusal { throw refusal }
        sink.onTermination = { [weak self] _ in self?.state.withLock { $0.closedStreams += 1 } }
        return stream
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

    /// Waits (up to 10 s) until `predicate` holds on the events.
    func wait(_ predicate: ([LiveSyncEvent]) -> Bool) async -> Bool {
        for _ in 0..<1000 {
            if predicate(events) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return predicate(events)
    }
}
