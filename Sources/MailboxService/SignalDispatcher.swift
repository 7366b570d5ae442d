import Foundation
import Locking
import MailboxStore

/// Runs inside mailboxd: takes due rows from the signal outbox, sends content-free signals through a
/// `SignalSender`, and applies the outcome — done, registration dropped, retried with backoff, or dropped as a
/// defect. It sleeps until the next row is due (or until woken by a write), so a gateway that is down costs a
/// few timer wake-ups, not a busy loop.
public final class SignalDispatcher: Sendable {
    /// How the dispatcher behaves.
    public struct Configuration: Sendable {
        /// Rows claimed at a time.
        public var batchSize = 256
        /// The first retry delay, in seconds; it doubles per attempt (full jitter) up to `maximumBackoff`.
        public var baseBackoff = 0.5
        /// The longest retry delay, in seconds.
        public var maximumBackoff = 60.0
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
    private let sender: any SignalSender
    private let metrics: Metrics
    private let configuration: Configuration
    private let log: @Sendable (String) -> Void
    private let wakeup = LockedValue(Wakeup())
    private let loop = LockedValue<Task<Void, Never>?>(nil)

    /// Creates a dispatcher; call `start()` to run it.
    public init(
        store: MailboxStore, sender: any SignalSender, metrics: Metrics, configuration: Configuration = Configuration(),
        log: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.store = store
        self.sender = sender
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

    /// Stops the loop after the current batch.
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
        while !Task.isCancelled {
            let items: [OutboxItem]
            do {
                items = try await store.claimDueSignals(limit: configuration.batchSize)
            } catch {
                log("dispatcher: cannot read the outbox: \(error)")
                await sleep(seconds: 1)
                continue
            }
            if items.isEmpty {
                let now = Date().timeIntervalSince1970
                let next = (try? await store.nextSignalDue()) ?? nil
                let wait = next.map { min(max($0 - now, 0.001), configuration.idleCheckInterval) }
                await sleep(seconds: wait ?? configuration.idleCheckInterval)
                continue
            }
            await withTaskGroup(of: Void.self) { group in
                for item in items { group.addTask { await self.process(item) } }
            }
        }
    }

    /// Delay before retry number `attempt` (1-based): full jitter over an exponential ceiling.
    func backoff(attempt: Int, retryAfter: Double?) -> Double {
        let ceiling = min(
            configuration.maximumBackoff, configuration.baseBackoff * pow(2, Double(min(attempt, 30) - 1)))
        let jittered = Double.random(in: 0...ceiling)
        return max(jittered, retryAfter ?? 0, 0.05)
    }

    private func process(_ item: OutboxItem) async {
        let now = Date().timeIntervalSince1970
        let labels = Self.labels(item)
        if sender.isBackgroundOnly(item), let wait = await backgroundDelay(deviceID: item.deviceID, now: now) {
            metrics.increment(
                "mailboxd_signals_deferred_total", labels: labels + ",reason=\"backgroundBudget\"",
                help: "Signals delayed to stay within the background budget.")
            try? await store.rescheduleSignal(item, after: wait, error: "backgroundBudget")
            return
        }
        let outcome = await sender.send(item)
        do {
            switch outcome {
            case .delivered:
                metrics.increment("mailboxd_signals_sent_total", labels: labels, help: "Signals accepted by APNs.")
                if sender.isBackgroundOnly(item) {
                    try await store.recordEvent(Self.backgroundKey(item.deviceID), keep: configuration.backgroundWindow)
                }
                try await store.completeSignal(item, sentModseq: item.modseq)
            case .dropRegistration(let reason, let unregisteredAt):
                countFailure(reason, labels)
                let deleted = try await store.deleteUnregisteredDevice(
                    id: item.deviceID, unregisteredAt: unregisteredAt)
                if !deleted { try await store.dropSignal(item) }
                log("dispatcher: device \(item.deviceID) \(deleted ? "removed" : "kept (stale report)"): \(reason)")
            case .retry(let reason, let retryAfter):
                countFailure(reason, labels)
                metrics.increment(
                    "mailboxd_signal_retries_total", labels: labels, help: "Signals scheduled for another attempt.")
                try await store.rescheduleSignal(
                    item, after: backoff(attempt: item.attempts + 1, retryAfter: retryAfter), error: reason)
            case .defect(let reason):
                countFailure(reason, labels)
                metrics.increment(
                    "mailboxd_signal_defects_total", labels: labels, help: "Signals that can never be sent (a defect).")
                log("dispatcher: DEFECT, signal for device \(item.deviceID) dropped: \(reason)")
                try await store.dropSignal(item)
            }
        } catch {
            log("dispatcher: cannot record the outcome for device \(item.deviceID): \(error)")
        }
    }

    private func countFailure(_ reason: String, _ labels: String) {
        metrics.increment(
            "mailboxd_signals_failed_total", labels: labels + ",reason=\"\(Metrics.escape(reason))\"",
            help: "Signals refused, by app, environment and reason.")
    }

    /// The `app` (topic) and `environment` labels of a row's signal metrics.
    static func labels(_ item: OutboxItem) -> String {
        "app=\"\(Metrics.escape(item.topic))\",environment=\"\(item.environment.rawValue)\""
    }

    /// The key of a device's background sends in the store, where the budget holds across instances and restarts.
    static func backgroundKey(_ deviceID: Int64) -> String { "background:\(deviceID)" }

    /// How long the device's next background signal must wait to stay within the budget, or `nil` for none. When
    /// the store cannot say, the signal waits a minute rather than risk Apple's throttling.
    private func backgroundDelay(deviceID: Int64, now: Double) async -> Double? {
        guard
            let recent = try? await store.recentEvents(
                Self.backgroundKey(deviceID), within: configuration.backgroundWindow)
        else { return 60 }
        guard recent.count >= configuration.backgroundBudget, let oldest = recent.first else { return nil }
        return max(1, oldest + configuration.backgroundWindow - now)
    }
}
