import Durations
import Foundation
import Locking
import MailboxStore
import Push
import ServiceMetrics

/// Runs inside mailboxd: takes due rows from the signal outbox, builds each device's service-neutral signal
/// (its alias, the tag of the state now under its key, the unread count for badge apps), sends it through the
/// device's push service (``PushRouter``) and applies the outcome — done, registration dropped, retried with
/// backoff, or dropped as a defect. A background signal beyond the budget of a service that throttles them is
/// deferred, which is not a failure. It sleeps until the next row is due (or until woken by a write), so a
/// gateway that is down costs a few timer wake-ups, not a busy loop. Time is the store's clock.
public final class SignalDispatcher: Sendable {
    /// How the dispatcher behaves.
    public struct Configuration: Sendable {
        /// Rows claimed at a time.
        public var batchSize = 256
        /// The retry schedule of failed signals.
        public var backoff = Backoff()
        /// Background-only signals allowed per device per `backgroundWindow`; more are delayed.
        public var backgroundBudget = 3
        /// The window of the background budget, in seconds.
        public var backgroundWindow = 3600.0
        /// The longest the loop sleeps without checking the outbox, in seconds.
        public var idleCheckInterval = 5.0

        /// The defaults.
        public init() {}
    }

    private struct Wakeup {
        var pending = false
        var generation = 0
        var continuation: CheckedContinuation<Void, Never>?
    }

    private let store: MailboxStore
    private let router: PushRouter
    private let metrics: Metrics
    private let configuration: Configuration
    private let log: @Sendable (String) -> Void
    private let report: @Sendable (SignalReport) -> Void
    private let wakeup = LockedValue(Wakeup())
    private let loop = LockedValue<Task<Void, Never>?>(nil)

    /// Creates a dispatcher; call `start()` to run it.
    public init(
        store: MailboxStore, router: PushRouter, metrics: Metrics, configuration: Configuration = Configuration(),
        log: @escaping @Sendable (String) -> Void = { _ in },
        report: @escaping @Sendable (SignalReport) -> Void = { _ in }
    ) {
        self.report = report
        self.store = store
        self.router = router
        self.metrics = metrics
        self.configuration = configuration
        self.log = log
    }

    /// Starts the dispatch loop.
    public func start() {
        loop.withLock { task in
            guard task == nil else { return }
            task = Task { await self.run() }
        }
    }

    /// Stops the loop after the batches in flight.
    public func stop() async {
        let task = loop.withLock { $0 }
        task?.cancel()
        wake()
        await task?.value
    }

    /// Wakes the loop now (called after a write queued signals).
    public func wake() {
        let continuation = wakeup.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let continuation = state.continuation else {
                state.pending = true
                return nil
            }
            state.continuation = nil
            state.generation += 1
            return continuation
        }
        continuation?.resume()
    }

    /// Whether the loop is asleep: waiting for a wake-up or for its timer, with nothing claimed. A test that must
    /// know the loop went to sleep before it makes a change waits for this, not for a length of time.
    package var isAsleep: Bool { wakeup.withLock { $0.continuation != nil } }

    private func sleep(seconds: Double) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let generation = wakeup.withLock { state -> Int? in
                if state.pending || Task.isCancelled {
                    state.pending = false
                    return nil
                }
                state.continuation = continuation
                return state.generation
            }
            guard let generation else {
                continuation.resume()
                return
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + max(0.001, seconds)) {
                let timedOut = self.wakeup.withLock { state -> CheckedContinuation<Void, Never>? in
                    guard state.generation == generation, let waiting = state.continuation else { return nil }
                    state.continuation = nil
                    state.generation += 1
                    return waiting
                }
                timedOut?.resume()
            }
        }
    }

    private func run() async {
        // Rows a previous mailboxd claimed and never finished (it was killed mid-send) would otherwise wait for
        // their lease to run out.
        do {
            try await store.releaseSignalLeases()
        } catch {
            log("dispatcher: cannot release old outbox leases: \(error)")
        }
        // Two batches in flight: the next is claimed and sent while the answers of the last are awaited, so a
        // batch's slowest answer (a push service's, or a proxy's relay held by Nagle's algorithm until an ACK comes)
        // does not leave the connection idle. A device's row is leased while its batch runs, so no device is in two.
        await withTaskGroup(of: Void.self) { batches in
            var inFlight = 0
            while !Task.isCancelled {
                let items: [OutboxItem]
                do {
                    items = try await store.claimDueSignals(limit: configuration.batchSize)
                } catch {
                    log("dispatcher: cannot read the outbox: \(error)")
                    await batches.waitForAll()
                    inFlight = 0
                    await sleep(seconds: 1)
                    continue
                }
                if items.isEmpty {
                    // Nothing is claimed while the loop sleeps (``isAsleep``).
                    await batches.waitForAll()
                    inFlight = 0
                    let now = store.currentTime
                    let next = (try? await store.nextSignalDue()) ?? nil
                    let wait = next.map { min(max($0 - now, 0.001), configuration.idleCheckInterval) }
                    await sleep(seconds: wait ?? configuration.idleCheckInterval)
                    continue
                }
                batches.addTask {
                    await withTaskGroup(of: Void.self) { group in
                        for item in items { group.addTask { await self.process(item) } }
                    }
                }
                inFlight += 1
                if inFlight == 2 {
                    await batches.next()
                    inFlight -= 1
                }
            }
        }
    }

    /// The signal `item` gets from `service`, or why there is none (a defect: the device's app or alias is one
    /// this server cannot signal).
    static func signal(for item: OutboxItem, kind: PushSignal.Kind) -> PushSignal? {
        guard let alias = try? DeviceAlias(item.alias) else { return nil }
        return try? PushSignal(
            alias: alias, tag: item.signalKey?.tag(of: item.state.description),
            badge: kind == .badge ? item.unread : nil)
    }

    private func process(_ item: OutboxItem) async {
        let labels = Self.labels(item)
        guard let service = router.service(item.address.service) else {
            await drop(item, reason: "unknownService", labels: labels)
            return
        }
        guard let kind = service.signalKind(for: item.address), let signal = Self.signal(for: item, kind: kind) else {
            await drop(item, reason: "unknownApp", labels: labels)
            return
        }
        let budgeted = kind == .background && service.throttlesBackgroundSignals
        if budgeted, let wait = await backgroundDelay(deviceID: item.deviceID) {
            metrics.increment(
                "mailboxd_signals_deferred_total", labels: labels + ",reason=\"backgroundBudget\"",
                help: "Signals delayed to stay within the background budget.")
            try? await store.deferSignal(item, after: wait, reason: "backgroundBudget")
            report(
                SignalReport(
                    item: item, outcome: .deferred, reason: "backgroundBudget", latency: 0, at: store.currentTime))
            return
        }
        let started = ContinuousClock.now
        let outcome = await service.send(signal, to: item.address)
        let elapsed = ContinuousClock.now - started
        let latency = elapsed.seconds
        let told: (SignalReport.Outcome, String?) =
            switch outcome {
            case .delivered: (.sent, nil)
            case .dropRegistration(let reason, _): (.dropped, reason)
            case .retry(let reason, _): (.retry, reason)
            case .defect(let reason): (.defect, reason)
            }
        report(SignalReport(item: item, outcome: told.0, reason: told.1, latency: latency, at: store.currentTime))
        do {
            switch outcome {
            case .delivered:
                metrics.increment(
                    "mailboxd_signals_sent_total", labels: labels, help: "Signals accepted by the push service.")
                if budgeted {
                    try await store.recordEvent(Self.backgroundKey(item.deviceID), keep: configuration.backgroundWindow)
                }
                try await store.completeSignal(item, sentModseq: item.modseq)
            case .dropRegistration(let reason, let unregisteredAt):
                countFailure(reason, labels)
                let deleted = try await store.deleteUnregisteredDevice(
                    id: item.deviceID, registeredAt: item.registeredAt, unregisteredAt: unregisteredAt)
                if !deleted { try await store.dropSignal(item) }
                log("dispatcher: device \(item.deviceID) \(deleted ? "removed" : "kept (registered again)"): \(reason)")
            case .retry(let reason, let retryAfter):
                countFailure(reason, labels)
                metrics.increment(
                    "mailboxd_signal_retries_total", labels: labels, help: "Signals scheduled for another attempt.")
                try await store.rescheduleSignal(
                    item, after: configuration.backoff.delay(attempt: item.attempts + 1, retryAfter: retryAfter),
                    error: reason)
            case .defect(let reason):
                await drop(item, reason: reason, labels: labels)
            }
        } catch {
            log("dispatcher: cannot record the outcome for device \(item.deviceID): \(error)")
        }
    }

    /// Drops a signal that can never be sent and counts the defect.
    private func drop(_ item: OutboxItem, reason: String, labels: String) async {
        if reason == "unknownService" || reason == "unknownApp" {
            report(SignalReport(item: item, outcome: .defect, reason: reason, latency: 0, at: store.currentTime))
        }
        countFailure(reason, labels)
        metrics.increment(
            "mailboxd_signal_defects_total", labels: labels, help: "Signals that can never be sent (a defect).")
        log("dispatcher: DEFECT, signal for device \(item.deviceID) dropped: \(reason)")
        try? await store.dropSignal(item)
    }

    private func countFailure(_ reason: String, _ labels: String) {
        metrics.increment(
            "mailboxd_signals_failed_total", labels: labels + ",reason=\"\(PrometheusText.escape(reason))\"",
            help: "Signals refused, by app, environment and reason.")
    }

    /// The `service`, `app` and `environment` labels of a row's signal metrics.
    static func labels(_ item: OutboxItem) -> String {
        "service=\"\(item.address.service.rawValue)\",app=\"\(PrometheusText.escape(item.address.app))\","
            + "environment=\"\(item.address.environment.rawValue)\""
    }

    /// The key of a device's background sends in the store, where the budget holds across instances and restarts.
    static func backgroundKey(_ deviceID: Int64) -> String { "background:\(deviceID)" }

    /// How long the device's next background signal must wait to stay within the budget, or `nil` for none. When
    /// the store cannot say, the signal waits a minute rather than risk Apple's throttling.
    private func backgroundDelay(deviceID: Int64) async -> Double? {
        do {
            return try await store.waitBeforeEvent(
                Self.backgroundKey(deviceID), limit: configuration.backgroundBudget,
                within: configuration.backgroundWindow
            ).map { max(1, $0) }
        } catch {
            return 60
        }
    }
}
