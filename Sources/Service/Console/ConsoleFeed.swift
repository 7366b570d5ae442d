import Foundation
import HTTPServer
import JSONText
import Locking
import LoopEvents
import MailboxStore
import ServiceMetrics
import SignalDispatch
import Tracing

/// The signal-then-fetch loop as it happens, for the console: each change the store commits, each signal the
/// dispatcher sends (and its push service's answer), and each fetch a device makes, as numbered events. Events
/// are kept in a ring (the newest ``capacity``) so a console that reconnects is replayed what it missed
/// (`Last-Event-ID`), and streamed to every open console.
///
/// Content-free like the signals: an event names a username, a device alias, its service, app and environment,
/// a state and timings, never a subject, sender, address, token or body.
///
/// Events arrive from the store's writer, the dispatcher and the API's handlers; one task takes them in order,
/// resolves usernames, numbers them and hands them on, so the one feeding never waits for a console.
public final class ConsoleFeed: LoopObserver {
    /// Events kept for replay.
    public static let capacity = 5_000
    /// Freshness samples (change committed → fetched by a device) the percentiles are taken over.
    public static let freshnessWindow = 1_000
    /// Open consoles at most; one more is refused (503).
    public static let maximumStreams = 16

    enum Input: Sendable {
        case changes([CommittedChange])
        case signal(SignalReport)
        case fetch(sessionID: Int64, accountID: Int64, modseq: Int64, at: Double)
        case registered(sessionID: Int64)
    }

    struct Commit {
        var modseq: Int64
        var at: Double
    }

    struct State: ~Copyable {
        var nextID = 1
        var events: [ConsoleEvent] = []
        var streams: [ObjectIdentifier: EventStream] = [:]
        var usernames: [Int64: String] = [:]
        var sessionDevices: [Int64: [String]] = [:]
        /// Recent commits by account, oldest first.
        var commits: [Int64: [Commit]] = [:]
        /// The newest modseq each session fetched.
        var fetched: [Int64: Int64] = [:]
        var freshness: [Double] = []
        var freshnessCount = 0
        var gateways: [String: GatewayStats] = [:]
        /// This process's totals since it started, reported to the store (``InstanceReport``).
        var changes: Int64 = 0
        var signalsSent: Int64 = 0
        var signalsFailed: Int64 = 0

        /// The kept events after `id`, oldest first; `nil` when some after it are no longer kept.
        func kept(after id: Int) -> [ConsoleEvent]? {
            if id < (events.first?.id ?? nextID) - 1 { return nil }
            return events.filter { $0.id > id }
        }
    }

    /// How often this process reports itself to the store, in seconds (the cluster view).
    public static let reportInterval = 5.0

    let store: MailboxStore
    let metrics: Metrics
    private let state = LockedValue(State())
    /// One wake-up of the consoles' connections per window (``coalescing``), not one per event.
    private let batch = EventStreamBatch()
    /// What the feed told and the worker has not taken yet, oldest first.
    private let pending = LockedValue(Pending())
    /// Rung when the first input after a quiet spell is handed in.
    private let doorbell: AsyncStream<Void>.Continuation
    /// How long the worker waits after the first input of a burst for those right behind it: under load, one wake-up
    /// of the worker and one write to each console a window, instead of one for each commit (a person watching
    /// cannot tell 10 ms; the console-reach bench measures commit → event).
    static let coalescing = Duration.milliseconds(10)
    /// Inputs waiting at most; past it the oldest are dropped (the console is a view, never a ledger).
    static let pendingLimit = 50_000

    private struct Pending: ~Copyable {
        var inputs: [Input] = []
        var rung = false
    }
    private let worker: Task<Void, Never>
    private let reporter: Task<Void, Never>

    /// A console of `store`'s loop, told what happens by the ``LoopFeed`` it is added to; freshness is observed into
    /// `metrics` as `mailboxd_freshness_seconds`.
    public init(store: MailboxStore, metrics: Metrics) {
        self.store = store
        self.metrics = metrics
        let (rings, doorbell) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.doorbell = doorbell
        let state = state
        let batch = batch
        let pending = pending
        worker = Task { [store, metrics] in
            for await _ in rings {
                try? await Task.sleep(for: Self.coalescing)
                let inputs = pending.withLock { pending in
                    pending.rung = false
                    defer { pending.inputs = [] }
                    return pending.inputs
                }
                batch.begin()
                for input in inputs { await Self.take(input, state: state, store: store, metrics: metrics) }
                batch.end()
            }
        }
        let startedAt = store.currentTime
        reporter = Task { [store] in
            while !Task.isCancelled {
                let totals = state.withLock { ($0.changes, $0.signalsSent, $0.signalsFailed) }
                try? await store.reportInstance(
                    InstanceReport(
                        id: store.instanceID, startedAt: startedAt, seenAt: store.currentTime, changes: totals.0,
                        signalsSent: totals.1, signalsFailed: totals.2))
                try? await Task.sleep(for: .seconds(Self.reportInterval))
            }
        }
    }

    deinit {
        doorbell.finish()
        worker.cancel()
        reporter.cancel()
    }

    /// This process committed `changes`.
    public func committed(_ changes: [CommittedChange]) { hand(.changes(changes)) }

    /// The dispatcher's report of one outbox row.
    public func signalled(_ report: SignalReport) { hand(.signal(report)) }

    /// A session fetched the account's changes (a delta sync, or the first page of a full one).
    public func fetched(_ fetch: Fetch) {
        // The console names a fetch by the devices of its session: IMAP's, made without one, are not shown.
        guard let session = fetch.sessionID else { return }
        hand(.fetch(sessionID: session, accountID: fetch.accountID, modseq: fetch.modseq, at: fetch.at))
    }

    /// A session registered (or refreshed) a device: its fetches are named by that device from now on.
    public func registered(sessionID: Int64) { hand(.registered(sessionID: sessionID)) }

    /// Queues `input` for the worker, ringing it when it is the first since the worker last took them.
    private func hand(_ input: Input) {
        let ring = pending.withLock { pending -> Bool in
            if pending.inputs.count >= Self.pendingLimit { pending.inputs.removeFirst(pending.inputs.count / 10) }
            pending.inputs.append(input)
            defer { pending.rung = true }
            return !pending.rung
        }
        if ring { doorbell.yield() }
    }

    /// The events after `id` still kept, oldest first; `nil` when some after it are no longer kept (the console
    /// must start again from a snapshot).
    func events(after id: Int) -> [ConsoleEvent]? { state.withLock { $0.kept(after: id) } }

    /// The id of the newest event (0 before any).
    var lastEventID: Int { state.withLock { $0.nextID - 1 } }

    /// Opens a stream that replays the events after `lastID` and then carries each new one; `nil` when
    /// ``maximumStreams`` are open.
    public func openStream(after lastID: Int) -> EventStream? {
        let stream = EventStream(bufferLimit: 4 << 20, batch: batch)
        let opened = state.withLock { state -> Bool in
            guard state.streams.count < Self.maximumStreams else { return false }
            // Replay and registration under one lock: no event falls between them, and none is sent twice.
            if let missed = state.kept(after: lastID) {
                for event in missed { _ = stream.send(event: event.type, id: String(event.id), data: event.json) }
            } else {
                _ = stream.send(event: "reset", id: String(state.nextID - 1), data: "{}")
            }
            state.streams[ObjectIdentifier(stream)] = stream
            return true
        }
        guard opened else { return nil }
        let key = ObjectIdentifier(stream)
        stream.onTermination { [state] in _ = state.withLock { $0.streams.removeValue(forKey: key) } }
        return stream
    }

    /// Freshness over the window: how many samples, and the 50th, 90th and 99th percentiles in milliseconds.
    var freshness: FreshnessSummary {
        state.withLock { state in
            FreshnessSummary(samples: Array(state.freshness.suffix(Self.freshnessWindow)), total: state.freshnessCount)
        }
    }

    /// Each push service's answers so far.
    var gateways: [GatewayStats] { state.withLock { $0.gateways.values.sorted { $0.service < $1.service } } }

    // MARK: - The worker

    private static func take(_ input: Input, state: LockedValue<State>, store: MailboxStore, metrics: Metrics) async {
        switch input {
        case .changes(let changes):
            for change in changes {
                let name = await username(change.accountID, state: state, store: store)
                let modseq = change.modseq
                state.withLock { state in
                    state.changes += 1
                    // In place, trimmed in chunks: a copy out and back, or a shift per commit, would copy the list
                    // for each commit.
                    state.commits[change.accountID, default: []].append(Commit(modseq: modseq, at: change.at))
                    if state.commits[change.accountID]!.count >= 256 + 64 {
                        state.commits[change.accountID]!.removeFirst(64)
                    }
                }
                publish(
                    ChangeEvent(
                        at: millis(change.at), account: name, modseq: modseq,
                        state: SyncState(epoch: store.epoch, modseq: modseq).description), state: state)
            }
        case .signal(let report):
            let name = await username(report.item.accountID, state: state, store: store)
            let item = report.item
            state.withLock { state in
                var stats =
                    state.gateways[item.address.service.rawValue]
                    ?? GatewayStats(service: item.address.service.rawValue)
                stats.record(report)
                state.gateways[item.address.service.rawValue] = stats
                if report.outcome == .sent { state.signalsSent += 1 } else { state.signalsFailed += 1 }
            }
            publish(
                SignalEvent(
                    at: millis(report.at), account: name, device: item.alias, service: item.address.service.rawValue,
                    app: item.address.app, environment: item.address.environment.rawValue, modseq: item.modseq,
                    state: item.state.description, outcome: report.outcome.rawValue, reason: report.reason,
                    latencyMs: milliseconds(report.latency),
                    coalesced: item.modseq - item.lastSignalledModseq > 1 && item.lastSignalledModseq > 0,
                    attempt: item.attempts + 1,
                    trace: ChangeTrace.ids(epoch: store.epoch, accountID: item.accountID, modseq: item.modseq)
                        .trace.description), state: state)
        case .registered(let session):
            _ = state.withLock { $0.sessionDevices.removeValue(forKey: session) }
        case .fetch(let session, let account, let modseq, let at):
            let name = await username(account, state: state, store: store)
            var devices = state.withLock { $0.sessionDevices[session] }
            if devices == nil {
                let found = (try? await store.deviceAliases(sessionID: session)) ?? []
                state.withLock { $0.sessionDevices[session] = found }
                devices = found
            }
            let samples = state.withLock { state -> [Double] in
                defer { state.fetched[session] = max(state.fetched[session] ?? 0, modseq) }
                // A session's first fetch (its launch sync) only sets where it starts.
                guard let previous = state.fetched[session], modseq > previous else { return [] }
                let fresh = (state.commits[account] ?? []).filter { $0.modseq > previous && $0.modseq <= modseq }
                let values = fresh.map { max(0, at - $0.at) }
                state.freshness.append(contentsOf: values)
                if state.freshness.count >= freshnessWindow + 200 {
                    state.freshness.removeFirst(state.freshness.count - freshnessWindow)
                }
                state.freshnessCount += values.count
                return values
            }
            for seconds in samples {
                metrics.observe(
                    "mailboxd_freshness_seconds", seconds: seconds,
                    help: "From a change committed to its fetch by a device (the console's freshness).")
            }
            publish(
                FetchEvent(
                    at: millis(at), account: name, devices: devices ?? [], modseq: modseq,
                    state: SyncState(epoch: store.epoch, modseq: modseq).description,
                    freshnessMs: samples.map(milliseconds)), state: state)
        }
    }

    private static func username(_ account: Int64, state: LockedValue<State>, store: MailboxStore) async -> String {
        if let known = state.withLock({ $0.usernames[account] }) { return known }
        let name = (try? await store.username(accountID: account)) ?? nil
        guard let name else { return "account \(account)" }
        state.withLock { $0.usernames[account] = name }
        return name
    }

    /// Numbers the event, keeps it and sends it to every open console.
    private static func publish(_ body: some ConsoleEventBody, state: LockedValue<State>) {
        state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            let type = body.type
            let event = ConsoleEvent(id: id, type: type, json: body.json(id: id))
            state.events.append(event)
            // Trimmed in chunks: one shift of the array per 500 events, not one per event.
            if state.events.count >= capacity + 500 { state.events.removeFirst(state.events.count - capacity) }
            for stream in state.streams.values {
                _ = stream.send(event: type, id: String(id), data: event.json)
            }
        }
    }

    static func millis(_ seconds: Double) -> Int64 { Int64((seconds * 1000).rounded()) }

    /// A duration in seconds as milliseconds to a tenth (how every latency and freshness figure is shown).
    static func milliseconds(_ seconds: Double) -> Double { (seconds * 1000 * 10).rounded() / 10 }
}

/// One numbered event: its type (`change`, `signal`, `fetch`) and its JSON object.
struct ConsoleEvent: Sendable {
    var id: Int
    var type: String
    var json: String
}

/// An event's body: its type and its JSON object once numbered.
protocol ConsoleEventBody {
    var type: String { get }
    /// The JSON object with `id` first, then the fields in alphabetical order (`type` among them).
    func json(id: Int) -> String
}

struct ChangeEvent: ConsoleEventBody {
    var type = "change"
    var at: Int64
    var account: String
    var modseq: Int64
    var state: String

    func json(id: Int) -> String {
        var w = JSONObjectText()
        w.add("id", id)
        w.add("account", account)
        w.add("at", at)
        w.add("modseq", modseq)
        w.add("state", state)
        w.add("type", type)
        return w.json
    }
}

struct SignalEvent: ConsoleEventBody {
    var type = "signal"
    var at: Int64
    var account: String
    var device: String
    var service: String
    var app: String
    var environment: String
    var modseq: Int64
    var state: String
    var outcome: String
    var reason: String?
    var latencyMs: Double
    var coalesced: Bool
    var attempt: Int
    /// The change's trace id (`ChangeTrace`), the same the exporter names it by.
    var trace: String

    func json(id: Int) -> String {
        var w = JSONObjectText()
        w.add("id", id)
        w.add("account", account)
        w.add("app", app)
        w.add("at", at)
        w.add("attempt", attempt)
        w.add("coalesced", coalesced)
        w.add("device", device)
        w.add("environment", environment)
        w.add("latencyMs", latencyMs)
        w.add("modseq", modseq)
        w.add("outcome", outcome)
        w.add("reason", reason)
        w.add("service", service)
        w.add("state", state)
        w.add("trace", trace)
        w.add("type", type)
        return w.json
    }
}

struct FetchEvent: ConsoleEventBody {
    var type = "fetch"
    var at: Int64
    var account: String
    var devices: [String]
    var modseq: Int64
    var state: String
    var freshnessMs: [Double]

    func json(id: Int) -> String {
        var w = JSONObjectText()
        w.add("id", id)
        w.add("account", account)
        w.add("at", at)
        w.add("devices", devices)
        w.add("freshnessMs", freshnessMs)
        w.add("modseq", modseq)
        w.add("state", state)
        w.add("type", type)
        return w.json
    }
}

/// A push service's answers as the dispatcher reported them.
struct GatewayStats: Sendable, Encodable {
    var service: String
    /// Answers by outcome, or outcome and reason (`retry: HTTP 429`).
    var answers: [String: Int] = [:]
    var lastOutcome: String?
    var lastReason: String?
    var lastAnswerAt: Int64?
    var lastLatencyMs: Double?

    mutating func record(_ report: SignalReport) {
        let key = report.reason.map { "\(report.outcome.rawValue): \($0)" } ?? report.outcome.rawValue
        answers[key, default: 0] += 1
        lastOutcome = report.outcome.rawValue
        lastReason = report.reason
        lastAnswerAt = ConsoleFeed.millis(report.at)
        if report.latency > 0 { lastLatencyMs = ConsoleFeed.milliseconds(report.latency) }
    }
}

/// Freshness percentiles over the window.
struct FreshnessSummary: Sendable, Encodable {
    var windowCount: Int
    var total: Int
    var p50Ms: Double?
    var p90Ms: Double?
    var p99Ms: Double?

    init(samples: [Double], total: Int) {
        let sorted = samples.sorted()
        windowCount = sorted.count
        self.total = total
        func percentile(_ p: Double) -> Double? {
            guard !sorted.isEmpty else { return nil }
            let index = min(sorted.count - 1, Int((p * Double(sorted.count)).rounded(.up)) - 1)
            return ConsoleFeed.milliseconds(sorted[max(0, index)])
        }
        p50Ms = percentile(0.5)
        p90Ms = percentile(0.9)
        p99Ms = percentile(0.99)
    }
}
