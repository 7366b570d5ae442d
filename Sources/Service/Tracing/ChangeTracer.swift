import Locking
import LoopEvents
import MailboxStore
import SignalDispatch

/// Makes one trace of each change from the loop's feed (``LoopFeed``) and hands its spans to a ``SpanExporter``:
///
/// - `arrival <kind>` (server): the request that brought the change in (a message, a client's write), from its
///   start to its answer; the trace's root. A W3C `traceparent` the caller sent becomes a link to the caller's span.
/// - `commit` (internal): the change written in its transaction until the transaction committed; the parent of
///   every span below. When several arrivals for one account were committed in one transaction, the one whose
///   modseq the commit carries is its parent and the others are linked.
/// - `signal <service>` (client): one per outbox row the dispatcher finished — sent, retried (one span per attempt),
///   deferred by a budget, dropped — with the push service's answer and latency; from any instance.
/// - `fetch` (server): a device's delta sync (`/v1/changes`, or IMAP's SELECT with QRESYNC) that reached the change,
///   from any instance; linked to the change it asked from.
///
/// Every id is derived from the store's epoch, the account and the modseq (``ChangeTrace``), so instances sharing a
/// store write their spans into the same trace without telling each other. An arrival and its commit are both
/// known to this process but reported by different callers; a commit is held through two of the exporter's batches
/// (one to one and a half seconds) so its arrival can name it.
public final class ChangeTracer: LoopObserver {
    private struct HeldCommit {
        var change: CommittedChange
        var committedAt: Double
        var arrivals: [Arrival] = []
    }

    private struct State {
        /// Commits not yet written as spans, by account and modseq, in three generations: those committed since the
        /// last batch, those held through one batch, and those held through two, written at the next. A batch
        /// writes the oldest generation whole and moves the others up, with no counter to raise in each commit.
        var held: [[Key: HeldCommit]] = [[:], [:], [:]]
        /// Each account's recent commits' modseqs, oldest first: the commit an arrival was part of.
        var recent: [Int64: [Int64]] = [:]
        /// Arrivals whose commit was not seen (yet), with how many batches they waited.
        var orphans: [(arrival: Arrival, waited: Int)] = []

        /// Adds `arrival` to the held commit that carried it (the account's first at or after its own modseq);
        /// false when that commit is not held (not seen yet, or already written).
        mutating func hold(_ arrival: Arrival) -> Bool {
            guard let committed = recent[arrival.accountID]?.first(where: { $0 >= arrival.modseq }) else {
                return false
            }
            let key = Key(account: arrival.accountID, modseq: committed)
            guard let generation = held.indices.first(where: { held[$0][key] != nil }) else { return false }
            held[generation][key]!.arrivals.append(arrival)
            return true
        }
    }

    private struct Key: Hashable {
        var account: Int64
        var modseq: Int64
    }

    private let epoch: String
    private let exporter: SpanExporter?
    private let sink: @Sendable ([Span]) -> Void
    private let now: @Sendable () -> Double
    private let state = LockedValue(State())

    /// A tracer of the store of `epoch`, exporting through `exporter` (whose resource names this instance), on the
    /// store's clock `now`. Call ``start()``.
    public init(epoch: String, exporter: SpanExporter, now: @escaping @Sendable () -> Double) {
        self.epoch = epoch
        self.exporter = exporter
        sink = { spans in exporter.export(spans) }
        self.now = now
    }

    /// A tracer that hands its spans to `sink` and its held commits on ``release(final:)`` only (for tests).
    init(
        epoch: String, now: @escaping @Sendable () -> Double,
        sink: @escaping @Sendable ([Span]) -> Void
    ) {
        self.epoch = epoch
        exporter = nil
        self.sink = sink
        self.now = now
    }

    /// Starts the exporter, handing it the held commits' spans once an interval.
    public func start() {
        exporter?.start { [weak self] final in self?.released(final: final) ?? [] }
    }

    /// Writes what is held and sends what is queued, then stops the exporter.
    public func shutdown() async { await exporter?.shutdown() }

    // MARK: - The feed

    /// Holds the arrival until its commit is written (or writes it at once when that commit already was).
    public func arrived(_ arrival: Arrival) {
        state.withLock { state in
            if !state.hold(arrival) { state.orphans.append((arrival, 0)) }
        }
    }

    /// Holds each change until the next batch.
    public func committed(_ changes: [CommittedChange]) {
        let at = now()
        state.withLock { state in
            for change in changes where change.accountID != CommittedChange.everyAccount {
                state.held[0][Key(account: change.accountID, modseq: change.modseq)] = HeldCommit(
                    change: change, committedAt: at)
                // In place: a copy taken out and put back would copy the whole list for each commit.
                state.recent[change.accountID, default: []].append(change.modseq)
                if state.recent[change.accountID]!.count > 128 { state.recent[change.accountID]!.removeFirst(64) }
            }
            if state.recent.count > 100_000 { state.recent.removeAll() }
        }
    }

    /// Writes the signal's span at once: it is the commit's child, wherever the commit was.
    public func signalled(_ report: SignalReport) {
        let item = report.item
        let commit = ChangeTrace.commit(epoch: epoch, accountID: item.accountID, modseq: item.modseq)
        var attributes: [SpanAttribute] = [
            .int(.account, item.accountID), .int(.modseq, item.modseq), .int(.attempt, Int64(item.attempts + 1)),
            .bool(.coalesced, item.modseq - item.lastSignalledModseq > 1 && item.lastSignalledModseq > 0),
        ]
        attributes += [
            SpanAttribute.token(.device, item.alias), .token(.service, item.address.service.rawValue),
            .token(.app, item.address.app), .token(.environment, item.address.environment.rawValue),
            .token(.outcome, report.outcome.rawValue), report.reason.flatMap { .token(.reason, $0) },
        ].compactMap { $0 }
        let failed = report.outcome == .dropped || report.outcome == .defect || report.outcome == .retry
        sink([
            Span(
                context: SpanContext(traceID: commit.traceID, spanID: .random()), parent: commit.spanID,
                name: "signal \(item.address.service.rawValue)", kind: .client, start: report.at - report.latency,
                end: report.at, attributes: attributes, failed: failed)
        ])
    }

    /// Writes a delta sync's span at once, in the trace of the change it reached.
    public func fetched(_ fetch: Fetch) {
        guard let since = fetch.since, fetch.modseq > since else { return }
        let reached = ChangeTrace.commit(epoch: epoch, accountID: fetch.accountID, modseq: fetch.modseq)
        let from = ChangeTrace.commit(epoch: epoch, accountID: fetch.accountID, modseq: since)
        var attributes: [SpanAttribute] = [
            .int(.account, fetch.accountID), .int(.modseq, fetch.modseq), .int(.since, since),
        ]
        if let session = fetch.sessionID { attributes.append(.int(.session, session)) }
        attributes += [SpanAttribute.token(.path, fetch.path.rawValue)].compactMap { $0 }
        sink([
            Span(
                context: SpanContext(traceID: reached.traceID, spanID: .random()), parent: reached.spanID,
                name: "fetch", kind: .server, start: fetch.startedAt, end: fetch.at, attributes: attributes,
                links: since > 0 ? [from] : [])
        ])
    }

    // MARK: - Held commits

    /// Writes the commits held through a whole batch with their arrivals, and arrivals whose commit never came
    /// after two batches (all of them when `final`).
    func release(final: Bool) { sink(released(final: final)) }

    /// The spans of the commits held through a whole batch, with their arrivals, and of arrivals whose commit never
    /// came after two batches (all of them when `final`).
    private func released(final: Bool) -> [Span] {
        let (commits, orphans) = state.withLock { state -> ([HeldCommit], [Arrival]) in
            // Arrivals that came before their commit was seen: joined now.
            var waiting: [(arrival: Arrival, waited: Int)] = []
            for (arrival, waited) in state.orphans where !state.hold(arrival) {
                waiting.append((arrival, waited + 1))
            }
            // A commit waits through two batches, so its arrival (told after it, by another caller) is there.
            var commits = Array(state.held.removeLast().values)
            state.held.insert([:], at: 0)
            if final {
                for generation in state.held.indices { commits += state.held[generation].values }
                state.held = [[:], [:], [:]]
            }
            let given = waiting.filter { final || $0.waited >= 2 }.map(\.arrival)
            state.orphans = final ? [] : waiting.filter { $0.waited < 2 }
            return (commits, given)
        }
        var spans: [Span] = []
        for commit in commits { spans += self.spans(of: commit) }
        for arrival in orphans {
            let ids = ChangeTrace.ids(epoch: epoch, accountID: arrival.accountID, modseq: arrival.modseq)
            spans.append(span(of: arrival, in: ids.trace, id: ids.arrival))
        }
        return spans
    }

    private func spans(of commit: HeldCommit) -> [Span] {
        let change = commit.change
        let ids = ChangeTrace.ids(epoch: epoch, accountID: change.accountID, modseq: change.modseq)
        let trace = ids.trace
        // The arrival that wrote the commit's modseq is its parent; others in the same transaction are linked.
        let parentIndex =
            commit.arrivals.firstIndex { $0.modseq == change.modseq } ?? commit.arrivals.indices.last
        var spans: [Span] = []
        var linked: [SpanContext] = []
        var parent: SpanID?
        for (index, arrival) in commit.arrivals.enumerated() {
            let id = index == parentIndex ? ids.arrival : SpanID.random()
            if index == parentIndex { parent = id } else { linked.append(SpanContext(traceID: trace, spanID: id)) }
            spans.append(span(of: arrival, in: trace, id: id))
        }
        let attributes: [SpanAttribute] = [.int(.account, change.accountID), .int(.modseq, change.modseq)]
        spans.append(
            Span(
                context: SpanContext(traceID: trace, spanID: ids.commit),
                parent: parent, name: "commit", kind: .internal, start: min(change.at, commit.committedAt),
                end: commit.committedAt, attributes: attributes, links: linked))
        return spans
    }

    private func span(of arrival: Arrival, in trace: TraceID, id: SpanID) -> Span {
        let caller = arrival.traceparent.flatMap(SpanContext.init(traceparent:))
        let attributes: [SpanAttribute] =
            [.int(.account, arrival.accountID), .int(.modseq, arrival.modseq)]
            + [SpanAttribute.token(.arrival, arrival.kind.rawValue)].compactMap { $0 }
        return Span(
            context: SpanContext(traceID: trace, spanID: id), parent: nil, name: "arrival \(arrival.kind.rawValue)",
            kind: .server, start: arrival.startedAt, end: arrival.endedAt, attributes: attributes,
            links: caller.map { [$0] } ?? [])
    }
}
