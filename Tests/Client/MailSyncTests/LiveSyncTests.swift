import Foundation
import MailSync
import TestSupport
import Testing

@Suite("LiveSync with an in-process event stream")
struct LiveSyncTests {
    static let quick = LiveSync.Configuration(
        pingInterval: .seconds(5),
        retryPolicy: SyncRetryPolicy(initialDelay: .milliseconds(20), maximumDelay: .seconds(1)),
        jitter: false)

    func makeEngine(_ server: StreamingMailServer, cache: InMemoryMailCache) throws -> SyncEngine {
        try SyncEngine(transport: server, cache: cache, configuration: .init(retryPolicy: quickRetries))
    }

    /// Whether `event` is the end of a run that reached `state`.
    static func finished(_ event: SyncEvent, at state: String) -> Bool {
        if case .syncFinished(let report, _, _) = event { report.state == state } else { false }
    }

    func changeRuns(_ recorder: EventRecorder) -> Int {
        recorder.events.filter {
            if case .syncStarted(.change, _) = $0 { true } else { false }
        }.count
    }

    @Test("the stream opens naming the local state, and each announced change is synced at once")
    func changesAreSyncedAtOnce() async throws {
        let server = StreamingMailServer()
        server.server.deliver()
        let cache = InMemoryMailCache()
        let engine = try makeEngine(server, cache: cache)
        let recorder = EventRecorder(engine)
        await engine.sync(.launch)
        let live = LiveSync(transport: server, engine: engine, configuration: Self.quick)
        let liveEvents = LiveEventRecorder(live)
        await live.start()
        #expect(await liveEvents.wait { $0 == [.connected] })
        #expect(server.openings == [server.server.currentState])
        #expect(await live.isConnected)

        server.deliverAndAnnounce()
        #expect(await recorder.wait { _ in (try? cache.messageCount()) == 2 })
        #expect(changeRuns(recorder) == 1)
        server.announce(.ping)
        server.announce(.changed(state: server.server.currentState))
        #expect(await recorder.wait { $0.contains(.skipped(.change(state: server.server.currentState))) })
        #expect(changeRuns(recorder) == 1, "a change the cache already has costs no request")
    }

    @Test("a flood of changes during a sync costs at most one follow-up run, not one run each")
    func floodCoalesces() async throws {
        let server = StreamingMailServer()
        let cache = InMemoryMailCache()
        let engine = try makeEngine(server, cache: cache)
        let recorder = EventRecorder(engine)
        await engine.sync(.launch)
        let live = LiveSync(transport: server, engine: engine, configuration: Self.quick)
        let liveEvents = LiveEventRecorder(live)
        await live.start()
        #expect(await liveEvents.wait { $0 == [.connected] })

        server.server.closeGate()
        server.deliverAndAnnounce()
        #expect(await recorder.wait { _ in changeRuns(recorder) == 1 })
        for _ in 0..<200 { server.deliverAndAnnounce() }
        // The follower has taken in all 200 announcements while the run is held.
        #expect(await eventually { server.hasReadEveryNotice })
        server.server.openGate()
        let newest = server.server.currentState
        #expect(await recorder.wait { events in events.contains { Self.finished($0, at: newest) } })
        #expect(try cache.messageCount() == 201)
        // The run that was held pages up to the newest state (100 changes a page), so the follow-up the 200
        // announcements left is dropped. A signal naming that state is then skipped at once (during a follow-up run
        // it would join that run instead), and its event comes after every event of the runs.
        #expect(await engine.sync(.signal(state: newest)).outcome == .skipped)
        #expect(await recorder.wait { $0.contains(.skipped(.signal(state: newest))) })
        #expect(changeRuns(recorder) == 1)
        #expect(server.server.calls.filter { $0.endpoint == "changes" }.count <= 4)
        #expect(!(await engine.isSyncing))
    }

    @Test("a dropped stream is reopened with backoff, naming the state the cache reached meanwhile")
    func droppedStreamReconnects() async throws {
        let server = StreamingMailServer()
        let cache = InMemoryMailCache()
        let engine = try makeEngine(server, cache: cache)
        await engine.sync(.launch)
        let live = LiveSync(transport: server, engine: engine, configuration: Self.quick)
        let liveEvents = LiveEventRecorder(live)
        await live.start()
        #expect(await liveEvents.wait { $0.count == 1 })
        let before = server.server.currentState

        server.refuse(.network("connection refused"), .server(status: 503, code: nil, retryAfter: nil))
        server.endStream(throwing: MailSyncError.network("connection reset"))
        // While the stream is down, a push still drives a sync.
        server.server.deliver()
        await engine.request(.signal(state: nil))
        #expect(await liveEvents.wait { $0.filter { $0 == .connected }.count == 2 })
        let lost = liveEvents.events.compactMap { event -> Int? in
            if case .lost(_, let attempt, _) = event { attempt } else { nil }
        }
        #expect(lost == [1, 2, 3])
        #expect(server.openings.first == before)
        #expect(server.openings.count == 4)
        #expect(server.openings.last == (try cache.state()), "Last-Event-ID names the state the cache is at")
        #expect(try cache.messageCount() == 1)

        // An event resets the backoff; a stream the server ends cleanly is reopened too.
        server.deliverAndAnnounce()
        #expect(await liveEvents.wait { _ in (try? cache.messageCount()) == 2 })
        server.endStream()
        #expect(await liveEvents.wait { $0.filter { $0 == .connected }.count == 3 })
        guard case .lost(_, 1, _) = liveEvents.events.dropLast().last else {
            Issue.record("expected a first attempt after the event, got \(liveEvents.events)")
            return
        }
    }

    @Test("404 stops following for good; 401 stops it until credentials are renewed")
    func refusals() async throws {
        let server = StreamingMailServer()
        let engine = try makeEngine(server, cache: InMemoryMailCache())
        let live = LiveSync(transport: server, engine: engine, configuration: Self.quick)
        let liveEvents = LiveEventRecorder(live)
        server.refuse(.notFound)
        await live.start()
        #expect(await liveEvents.wait { $0 == [.stopped(.notFound)] })
        await live.credentialsRenewed()
        // Nothing the follower does later could show a reopening, so it is watched for a moment.
        #expect(await never(within: .milliseconds(100)) { server.openings.count > 1 || server.isOpen })

        let other = LiveSync(transport: server, engine: engine, configuration: Self.quick)
        let otherEvents = LiveEventRecorder(other)
        server.refuse(.unauthorized)
        await other.start()
        #expect(await otherEvents.wait { $0 == [.stopped(.unauthorized)] })
        // A reopening before the renewal would look the same afterwards, so it is watched for now.
        #expect(await never(within: .milliseconds(100)) { server.openings.count > 2 })
        await other.credentialsRenewed()
        #expect(await otherEvents.wait { $0 == [.stopped(.unauthorized), .connected] })
    }

    @Test("a stream that goes silent is taken for dead and reopened")
    func silenceReconnects() async throws {
        let server = StreamingMailServer()
        let engine = try makeEngine(server, cache: InMemoryMailCache())
        var configuration = Self.quick
        configuration.silenceLimit = .milliseconds(500)
        let live = LiveSync(transport: server, engine: engine, configuration: configuration)
        let liveEvents = LiveEventRecorder(live)
        await live.start()
        #expect(await liveEvents.wait { $0.count == 1 })
        // Pings keep it alive past the limit.
        for _ in 0..<12 {
            try await Task.sleep(for: .milliseconds(50))
            server.announce(.ping)
        }
        #expect(liveEvents.connections == 1)
        #expect(await liveEvents.wait { $0.filter { $0 == .connected }.count == 2 })
        #expect(server.closedStreams >= 1, "the silent stream was closed")
        guard case .lost(.network(let reason), 1, _) = liveEvents.events[1] else {
            Issue.record("expected a loss, got \(liveEvents.events)")
            return
        }
        #expect(reason.contains("silent"))
    }

    @Test("stop closes the stream and does not reopen it; start begins again")
    func stopCloses() async throws {
        let server = StreamingMailServer()
        let engine = try makeEngine(server, cache: InMemoryMailCache())
        let live = LiveSync(transport: server, engine: engine, configuration: Self.quick)
        let liveEvents = LiveEventRecorder(live)
        await live.start()
        #expect(await liveEvents.wait { $0.count == 1 })
        await live.stop()
        #expect(await liveEvents.wait { _ in server.closedStreams == 1 })
        // After a stop nothing is left to show a reopening, so it is watched for a moment.
        #expect(
            await never(within: .milliseconds(100)) { server.openings.count > 1 || liveEvents.events != [.connected] })
        await live.start()
        #expect(await liveEvents.wait { $0 == [.connected, .connected] })
    }
}
