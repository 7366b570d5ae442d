import Foundation
import MailSync
import TestSupport
import Testing

extension SyncEngine {
    /// Starts a sync for `trigger` in a task of its own and returns once the engine has taken the trigger in (a run
    /// started, or joined to the follow-up of the one in progress): the task then only waits for its run.
    func startSync(_ trigger: SyncTrigger) -> Task<SyncReport, Never> {
        Task.immediate { await self.sync(trigger) }
    }
}

@Suite("SyncEngine with an in-process server")
struct SyncEngineTests {
    func makeEngine(
        _ server: FakeMailServer, cache: any MailCacheStore = InMemoryMailCache(), pageSize: Int = 100,
        deadline: Duration = .seconds(25), retry: SyncRetryPolicy = quickRetries, fallback: Duration? = nil
    ) throws -> SyncEngine {
        try SyncEngine(
            transport: server, cache: cache,
            configuration: .init(
                signalDeadline: deadline, changesPageSize: pageSize, listingPageSize: 3, retryPolicy: retry,
                fallbackInterval: fallback))
    }

    @Test("the first sync lists everything, later ones page through changes")
    func fullThenDelta() async throws {
        let server = FakeMailServer()
        for _ in 0..<7 { server.deliver() }
        let cache = InMemoryMailCache()
        let engine = try makeEngine(server, cache: cache, pageSize: 4)
        let first = await engine.sync(.launch)
        #expect(first.fullResync && first.created == 7 && first.outcome == .completed)
        #expect(first.state == server.currentState)
        #expect(server.calls.filter { $0.endpoint == "messages" }.count == 3)

        let ids = server.mailbox.map(\.id)
        server.modify(ids[0]) { $0.seen = true }
        server.destroy(ids[1])
        for _ in 0..<8 { server.deliver() }
        let second = await engine.sync(.signal(state: server.currentState))
        #expect(!second.fullResync && second.pages == 3 && second.outcome == .completed)
        #expect(second.created == 8 && second.updated == 1 && second.destroyed == 1)
        #expect(second.fetchResult == .newData)
        #expect(syncedView(try cache.messages(in: nil)) == syncedView(server.mailbox))
        #expect(try cache.state() == server.currentState)
    }

    @Test("a signal carrying the local state (stale or duplicate) costs no request")
    func staleSignal() async throws {
        let server = FakeMailServer()
        server.deliver()
        let engine = try makeEngine(server)
        let recorder = EventRecorder(engine)
        await engine.sync(.launch)
        let requests = server.requestsStarted
        let report = await engine.sync(.signal(state: server.currentState))
        let again = await engine.sync(.signal(state: server.currentState))
        #expect(report.outcome == .skipped && again.outcome == .skipped && report.fetchResult == .noData)
        #expect(server.requestsStarted == requests)
        #expect(await recorder.wait { $0.filter { if case .skipped = $0 { true } else { false } }.count == 2 })
    }

    @Test("signals during a sync collapse into exactly one follow-up run")
    func signalsDuringSync() async throws {
        let server = FakeMailServer()
        server.deliver()
        let cache = InMemoryMailCache()
        let engine = try makeEngine(server, cache: cache)
        let recorder = EventRecorder(engine)
        await engine.sync(.launch)
        server.deliver()
        server.closeGate()
        let started = server.requestsStarted
        let first = await engine.startSync(.signal(state: server.currentState))
        #expect(await eventually { server.requestsStarted > started }, "the signal's run is held at the gate")
        var followers: [Task<SyncReport, Never>] = []
        for _ in 0..<5 {
            server.deliver()
            followers.append(await engine.startSync(.signal(state: server.currentState)))
        }
        followers.append(await engine.startSync(.timer))
        #expect(await engine.isSyncing)
        server.openGate()
        #expect(await first.value.outcome == .completed)
        for follower in followers {
            let report = await follower.value
            #expect(report.outcome == .completed && report.state == server.currentState)
        }
        #expect(recorder.starts == 3)  // launch, the signal's run, one follow-up
        #expect(syncedView(try cache.messages(in: nil)) == syncedView(server.mailbox))
    }

    @Test("lost signals: the fallback timer converges anyway")
    func fallbackTimer() async throws {
        let server = FakeMailServer()
        let cache = InMemoryMailCache()
        let engine = try makeEngine(server, cache: cache, fallback: .milliseconds(20))
        let recorder = EventRecorder(engine)
        /// The timer's runs so far.
        func timerRuns() -> Int {
            recorder.events.filter { if case .syncStarted(.timer, _) = $0 { true } else { false } }.count
        }
        await engine.start()
        // Each delivery comes with no signal, and the next one only after the timer's next run has begun.
        for round in 0..<5 {
            let runs = timerRuns()
            server.deliver(subject: "no signal \(round)")
            #expect(await eventually { timerRuns() > runs })
        }
        let target = server.currentState
        let converged = try await eventually { try cache.state() == target }
        await engine.stopFallbackTimer()
        #expect(converged)
        #expect(syncedView(try cache.messages(in: nil)) == syncedView(server.mailbox))
    }

    @Test("cannotCalculateChanges leads to a full resync that converges")
    func fullResyncOnCannotCalculate() async throws {
        let server = FakeMailServer()
        for _ in 0..<4 { server.deliver() }
        let cache = InMemoryMailCache()
        let engine = try makeEngine(server, cache: cache)
        await engine.sync(.launch)
        server.destroy(server.mailbox[0].id)
        server.deliver()
        server.compact()
        server.deliver()
        let report = await engine.sync(.signal(state: server.currentState))
        #expect(report.fullResync && report.outcome == .completed)
        #expect(report.created == 2 && report.destroyed == 1)
        #expect(syncedView(try cache.messages(in: nil)) == syncedView(server.mailbox))
        #expect(server.calls.contains { $0.endpoint == "changes" })
    }

    @Test("a state from another server is answered with a full resync")
    func foreignState() async throws {
        let server = FakeMailServer(epoch: "e2")
        server.deliver()
        let cache = InMemoryMailCache(messages: [], state: "e1-40")
        let engine = try makeEngine(server, cache: cache)
        let report = await engine.sync(.launch)
        #expect(try report.fullResync && cache.state() == server.currentState)
    }

    @Test("401 stops syncing and reports until credentials are renewed")
    func unauthorized() async throws {
        let server = FakeMailServer()
        server.deliver()
        let engine = try makeEngine(server)
        await engine.sync(.launch)
        server.deliver()
        server.inject(.unauthorized)
        let report = await engine.sync(.signal(state: server.currentState))
        #expect(report.outcome == .failed(.unauthorized) && report.fetchResult == .failed)
        let requests = server.requestsStarted
        let rejected = await engine.sync(.timer)
        #expect(rejected.outcome == .failed(.unauthorized))
        #expect(server.requestsStarted == requests)
        await engine.credentialsRenewed()
        let resumed = await engine.sync(.manual)
        #expect(resumed.outcome == .completed && resumed.state == server.currentState)
    }

    @Test("5xx and network errors are retried with backoff")
    func retries() async throws {
        let server = FakeMailServer()
        server.deliver()
        let engine = try makeEngine(server)
        let recorder = EventRecorder(engine)
        await engine.sync(.launch)
        server.deliver()
        server.inject(.status(503), .network, .status(500))
        let report = await engine.sync(.timer)
        #expect(report.outcome == .completed && report.created == 1)
        #expect(server.calls.filter { $0.endpoint == "changes" }.count == 4)
        #expect(await recorder.wait { _ in recorder.retries == 3 })
    }

    @Test("retries end after the policy's attempts and the run fails")
    func retriesGiveUp() async throws {
        let server = FakeMailServer()
        server.deliver()
        let engine = try makeEngine(server, retry: SyncRetryPolicy(initialDelay: .milliseconds(1), maximumAttempts: 2))
        await engine.sync(.launch)
        server.deliver()
        server.inject(.status(503), .status(503), .status(503))
        let report = await engine.sync(.timer)
        #expect(report.outcome == .failed(.server(status: 503, code: nil, retryAfter: nil)))
        #expect(report.fetchResult == .failed)
        #expect(await engine.sync(.timer).outcome == .completed)
    }

    @Test("network loss mid-run: earlier pages stay applied and the sync resumes from the last applied state")
    func networkLossMidRun() async throws {
        let server = FakeMailServer()
        server.deliver()
        let cache = InMemoryMailCache()
        let engine = try makeEngine(server, cache: cache, pageSize: 5, retry: SyncRetryPolicy(maximumAttempts: 0))
        await engine.sync(.launch)
        let base = server.currentState
        for _ in 0..<12 { server.deliver() }
        server.inject(.pass, .network)
        let broken = await engine.sync(.signal(state: server.currentState))
        #expect(broken.outcome == .failed(.network("connection reset")))
        #expect(broken.pages == 1 && broken.created == 5 && broken.fetchResult == .newData)
        let pageState = try #require(try cache.state())
        #expect(try pageState != base && cache.messageCount() == 6)

        let resumed = await engine.sync(.timer)
        #expect(resumed.outcome == .completed && resumed.created == 7)
        let sinceValues = server.calls.filter { $0.endpoint == "changes" }.compactMap(\.argument)
        #expect(sinceValues.suffix(3) == [pageState, pageState, sinceValues.last!])
        #expect(syncedView(try cache.messages(in: nil)) == syncedView(server.mailbox))
    }

    @Test("a signal-started sync stops at its deadline and keeps the pages applied before it")
    func deadline() async throws {
        let server = FakeMailServer()
        server.deliver()
        let cache = InMemoryMailCache()
        // Generous: the first page must fit in it even on a loaded machine; the second page hangs forever.
        let engine = try makeEngine(server, cache: cache, pageSize: 2, deadline: .seconds(3))
        await engine.sync(.launch)
        for _ in 0..<5 { server.deliver() }
        server.inject(.pass, .hang)
        let report = await engine.sync(.signal(state: server.currentState))
        #expect(report.outcome == .deadlineExceeded && report.pages == 1 && report.fetchResult == .newData)
        #expect(try cache.messageCount() == 3)
        let after = await engine.sync(.manual)
        #expect(try after.outcome == .completed && cache.messageCount() == 6)
    }

    @Test("large bodies are fetched on demand and cached")
    func bodiesOnDemand() async throws {
        let server = FakeMailServer()
        let small = server.deliver(bodySize: 100)
        let large = server.deliver(bodySize: MailMessage.inlineBodyLimit + 1)
        let cache = InMemoryMailCache()
        let engine = try makeEngine(server, cache: cache)
        await engine.sync(.launch)
        #expect(try cache.message(id: small)?.body?.count == 100)
        #expect(try cache.message(id: large)?.body == nil)
        let body = try await engine.body(ofMessage: large)
        #expect(body.count == MailMessage.inlineBodyLimit + 1)
        let fetches = server.calls.filter { $0.endpoint == "message" }.count
        _ = try await engine.body(ofMessage: large)
        _ = try await engine.body(ofMessage: small)
        #expect(server.calls.filter { $0.endpoint == "message" }.count == fetches)
        server.modify(large) { $0.flagged = true }
        await engine.sync(.manual)
        #expect(try cache.message(id: large)?.body?.count == MailMessage.inlineBodyLimit + 1)
        #expect(try cache.message(id: large)?.flagged == true)
    }

    @Test("local actions update the server and the cache")
    func localActions() async throws {
        let server = FakeMailServer()
        let first = server.deliver()
        let second = server.deliver()
        let cache = InMemoryMailCache()
        let engine = try makeEngine(server, cache: cache)
        await engine.sync(.launch)
        let updated = try await engine.update(messageID: first, MessageUpdate(seen: true, mailbox: .archive))
        #expect(updated.seen && updated.mailbox == .archive)
        #expect(try cache.message(id: first)?.mailbox == .archive)
        #expect(try await engine.messages(in: .archive).map(\.id) == [first])
        try await engine.delete(messageID: second)
        #expect(try cache.message(id: second) == nil)
        await engine.sync(.manual)
        #expect(syncedView(try cache.messages(in: nil)) == syncedView(server.mailbox))
        await #expect(throws: MailSyncError.notFound) { try await engine.body(ofMessage: "missing") }
    }

    @Test("converges to the server through random changes, triggers and faults", arguments: [1, 2, 3] as [UInt64])
    func randomConvergence(seed: UInt64) async throws {
        var random = SplitMix64(state: seed)
        let server = FakeMailServer()
        let cache = InMemoryMailCache()
        let engine = try makeEngine(server, cache: cache, pageSize: 3)
        var oldStates: [String] = []
        for _ in 0..<60 {
            for _ in 0..<Int.random(in: 0...4, using: &random) {
                let ids = server.mailbox.map(\.id)
                switch Int.random(in: 0..<10, using: &random) {
                case 0..<4:
                    let large = Int.random(in: 0..<5, using: &random) == 0
                    server.deliver(bodySize: large ? 20_000 : Int.random(in: 1...500, using: &random))
                case 4..<6 where !ids.isEmpty:
                    server.modify(ids.randomElement(using: &random)!) { $0.seen.toggle() }
                case 6 where !ids.isEmpty:
                    server.modify(ids.randomElement(using: &random)!) {
                        $0.mailbox = [.archive, .trash, .inbox][Int.random(in: 0..<3, using: &random)]
                    }
                case 7 where !ids.isEmpty:
                    server.destroy(ids.randomElement(using: &random)!)
                case 8:
                    if Bool.random(using: &random) { server.compact() }
                default:
                    break
                }
            }
            oldStates.append(server.currentState)
            switch Int.random(in: 0..<6, using: &random) {
            case 0: server.inject(.status(503))
            case 1: server.inject(.pass, .network)
            default: break
            }
            switch Int.random(in: 0..<5, using: &random) {
            case 0: break  // the signal was lost
            case 1: await engine.sync(.signal(state: oldStates.randomElement(using: &random)))
            case 2: await engine.sync(.timer)
            default: await engine.sync(.signal(state: server.currentState))
            }
        }
        let final = await engine.sync(.manual)
        #expect(final.state == server.currentState)
        #expect(syncedView(try cache.messages(in: nil)) == syncedView(server.mailbox))
    }
}
