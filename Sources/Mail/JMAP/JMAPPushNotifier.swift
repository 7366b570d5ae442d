import Durations
import Foundation
import Locking
import MailboxStore
import OpenSSLCrypto
import Push

/// Tells JMAP push subscriptions (RFC 8620 §7.2) of changes: every verified subscription whose account moved past
/// the state it was last told of gets one StateChange naming the types it asked for that changed, with their new
/// states, through a ``SubscriptionPushService`` (Web Push).
///
/// What is owed lives in the store, as device signals live in the outbox: each subscription keeps the account state
/// it was last told of (`told_modseq`), so a StateChange owed when the process dies — kill -9 included, between a
/// commit and its push or during a retry — is sent by the next process, or by another instance sharing the store.
/// A worker claims the owed subscriptions under a lease (each goes out once across instances), sends, and records
/// the outcome: told (and one pacing token spent, as a device's signal spends one), retried with the one
/// ``Backoff`` and never sooner than the push service's `Retry-After`, or removed when the push service says the
/// subscription is gone. Pushes are hints, as the RFC says: while one is owed, newer changes merge into it, and the
/// push carries the newest states.
public final class JMAPPushNotifier: Sendable {
    /// Limits of the subscriptions this server accepts, and how owed pushes are looked for and retried.
    public struct Configuration: Sendable {
        /// Whether a subscription without `keys` is accepted. Its pushes are plain JSON, readable by whoever runs
        /// the URL's server, so the default is no (`mailboxd --jmap-push-allow-unencrypted`).
        public var allowsUnencrypted = false
        /// The longest lifetime of a subscription, in seconds; a later `expires` is shortened to it.
        public var maximumLifetime: Double = 7 * 86_400
        /// How often the worker looks for owed pushes without a commit of this process to wake it: retries that came
        /// due, pacing tokens that came back, commits of other instances, subscriptions made through another
        /// instance. Also how long the set of accounts with subscriptions is trusted.
        public var sweepInterval: Duration = .seconds(5)
        /// The retry schedule of a push that failed (an hour at most between attempts).
        public var backoff = Backoff(base: 1, maximum: 3600)
        /// The most subscriptions claimed, and pushed at once, per round.
        public var batchSize = 32

        /// The defaults.
        public init() {}
    }

    private struct State {
        /// The accounts with a verified subscription, as last read (and those this process just changed): a commit
        /// to any other account costs a set lookup and nothing more.
        var subscribed: Set<Int64> = []
        /// Accounts whose subscriptions this process changed, and when: kept in `subscribed` through the next
        /// refresh, whose read may have begun before the change.
        var changedHere: [Int64: ContinuousClock.Instant] = [:]
    }

    let store: MailboxStore
    /// The service pushes go through now (a reload may replace it; none while Web Push is not configured).
    let service: @Sendable () -> (any SubscriptionPushService)?
    /// The configuration.
    public let configuration: Configuration
    private let state = LockedValue(State())
    private let wakeup: AsyncStream<Void>.Continuation
    private let tasks: LockedValue<[Task<Void, Never>]> = LockedValue([])
    /// A wake-up for when the earliest waiting push comes due, sooner than the next sweep.
    private let timer: LockedValue<Task<Void, Never>?> = LockedValue(nil)
    private let log: @Sendable (String) -> Void

    /// Watches `store`'s commits and pushes through `service`. `log` gets one line per subscription removed or
    /// push failed, never a URL or a key.
    public convenience init(
        store: MailboxStore, service: any SubscriptionPushService, configuration: Configuration = Configuration(),
        log: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.init(store: store, services: { service }, configuration: configuration, log: log)
    }

    /// Watches `store`'s commits and pushes through the service `services` names at each push (a reload may replace
    /// it); a push while it names none waits with the one backoff.
    public init(
        store: MailboxStore, services: @escaping @Sendable () -> (any SubscriptionPushService)?,
        configuration: Configuration = Configuration(), log: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.store = store
        self.service = services
        self.configuration = configuration
        self.log = log
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        wakeup = continuation
        store.observeChangesOfEveryInstance { [weak self] changes in self?.note(changes) }
        let interval = max(configuration.sweepInterval, .milliseconds(10))
        let sweeper = Task { [weak self] in
            while !Task.isCancelled {
                guard let self else { return }
                let started = ContinuousClock.now
                if let accounts = try? await self.store.accountsWithVerifiedPushSubscriptions() {
                    self.state.withLock { state in
                        state.changedHere = state.changedHere.filter { $0.value >= started }
                        state.subscribed = accounts.union(state.changedHere.keys)
                    }
                }
                self.wakeup.yield()
                try? await Task.sleep(for: interval)
            }
        }
        let worker = Task { [weak self] in
            _ = try? await self?.store.releasePushLeases()
            for await _ in stream {
                guard let self else { return }
                await self.sendOwed()
                await self.wakeWhenNextDue()
            }
        }
        tasks.withLock { $0 = [sweeper, worker] }
    }

    /// Stops the worker (pushes in flight finish on their own; what is still owed stays owed in the store).
    public func shutdown() {
        wakeup.finish()
        for task in tasks.withLock({ $0 }) { task.cancel() }
        timer.withLock { $0?.cancel() }
    }

    /// Wakes the worker when the earliest push that waits for its time (a retry, a pacing token) comes due, when that
    /// is before the next sweep: a subscription whose burst is spent is told at the refill rate.
    private func wakeWhenNextDue() async {
        guard let seconds = try? await store.secondsUntilNextPushDue(), seconds < configuration.sweepInterval.seconds
        else { return }
        let task = Task { [weak self] in
            guard (try? await Task.sleep(for: .seconds(max(0.001, seconds)))) != nil else { return }
            self?.wakeup.yield()
        }
        timer.withLock { timer in
            timer?.cancel()
            timer = task
        }
    }

    deinit { shutdown() }

    private func note(_ changes: [CommittedChange]) {
        let relevant = state.withLock { state in
            changes.contains { $0.accountID == CommittedChange.everyAccount || state.subscribed.contains($0.accountID) }
        }
        if relevant { wakeup.yield() }
    }

    /// Looks at the account's commits from now on, after this process changed its subscriptions.
    func forget(accountID: Int64) {
        state.withLock { state in
            state.subscribed.insert(accountID)
            state.changedHere[accountID] = ContinuousClock.now
        }
    }

    /// Claims and sends what is owed, a batch at a time, until nothing due is left.
    private func sendOwed() async {
        while !Task.isCancelled {
            guard let due = try? await store.claimDuePushes(limit: configuration.batchSize), !due.isEmpty else {
                return
            }
            await withTaskGroup(of: Void.self) { group in
                for item in due { group.addTask { await self.tell(item) } }
            }
            if due.count < configuration.batchSize { return }
        }
    }

    /// One owed StateChange: the account's states now, the types the subscription asked for that changed since it
    /// was last told, one push, and its outcome recorded.
    private func tell(_ item: DuePush) async {
        let subscription = item.subscription
        guard let counters = try? await store.changeCounters(accountID: subscription.accountID) else {
            await retry(item, retryAfter: nil)
            return
        }
        let named = TypeStates(counters, epoch: store.epoch).changed(since: item.toldModseq, of: counters).filter {
            name, _ in subscription.types?.contains(name) ?? true
        }
        guard !named.isEmpty else {
            _ = try? await store.completePush(id: subscription.id, toldModseq: counters.modseq, sent: false)
            return
        }
        let message = SubscriptionPushMessage.stateChange(accountID: String(subscription.accountID), states: named)
        let topic = Self.topic(for: subscription.id)
        guard let service = service() else { return await retry(item, retryAfter: nil) }
        switch await service.push(message, url: subscription.url, keys: subscription.keys, topic: topic) {
        case .delivered:
            _ = try? await store.completePush(id: subscription.id, toldModseq: counters.modseq, sent: true)
        case .dropRegistration(let reason, _):
            _ = try? await store.deletePushSubscription(id: subscription.id, accountID: subscription.accountID)
            forget(accountID: subscription.accountID)
            log("mailboxd: JMAP push subscription removed (\(reason))")
        case .defect(let reason):
            // Never sendable as it is: told, so it is not tried again for this change.
            _ = try? await store.completePush(id: subscription.id, toldModseq: counters.modseq, sent: false)
            log("mailboxd: JMAP push not sent (\(reason))")
        case .retry(let reason, let retryAfter):
            if item.attempts == 0 { log("mailboxd: JMAP push failed, will retry (\(reason))") }
            await retry(item, retryAfter: retryAfter)
        }
    }

    private func retry(_ item: DuePush, retryAfter: Double?) async {
        let delay = configuration.backoff.delay(attempt: item.attempts + 1, retryAfter: retryAfter)
        _ = try? await store.reschedulePush(id: item.subscription.id, after: delay)
    }

    /// Sends the PushVerification for a new subscription, retried a few times with the one backoff. It is not kept
    /// in the store: a client that never hears it makes another subscription.
    func verify(_ subscription: PushSubscriptionRecord) {
        let topic = Self.topic(for: subscription.id)
        let message = SubscriptionPushMessage.verification(
            subscriptionID: subscription.id, code: subscription.verificationCode)
        Task { [service, log, backoff = configuration.backoff] in
            for attempt in 1...Self.verificationAttempts {
                guard let service = service() else { return }
                switch await service.push(message, url: subscription.url, keys: subscription.keys, topic: topic) {
                case .delivered:
                    return
                case .retry(_, let retryAfter) where attempt < Self.verificationAttempts:
                    let delay = backoff.delay(attempt: attempt, retryAfter: retryAfter)
                    guard (try? await Task.sleep(for: .seconds(delay))) != nil else { return }
                case .dropRegistration(let reason, _), .defect(let reason), .retry(let reason, _):
                    log("mailboxd: JMAP push verification not delivered (\(reason))")
                    return
                }
            }
        }
    }

    /// The attempts a PushVerification gets.
    static let verificationAttempts = 4

    /// The RFC 8030 `Topic` of a subscription's pushes: a constant per subscription that names nothing else, so a
    /// push service holding an older StateChange for an offline client replaces it.
    static func topic(for subscriptionID: String) -> String {
        String(Base64URL.encode(SHA256.hash("signalfetch-jmap-topic:" + subscriptionID)).prefix(32))
    }
}
