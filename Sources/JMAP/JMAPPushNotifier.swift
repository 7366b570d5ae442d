import Foundation
import Locking
import MailboxStore
import OpenSSLCrypto
import Push

/// Tells JMAP push subscriptions (RFC 8620 §7.2) of changes: after each commit of this process that changed an
/// account, every verified subscription of the account gets one StateChange naming the types it asked for that
/// changed, with their new states, through a ``SubscriptionPushService`` (Web Push). Every commit is made by
/// exactly one process, so with several instances sharing a store each change is pushed once, by the instance that
/// committed it.
///
/// Pushes are hints, as the RFC says: a subscription has at most one push in flight and one waiting (a newer
/// StateChange is merged into the waiting one); a transient failure is retried a few times with backoff, then the
/// change is left for the next one (the client's states converge on its next fetch anyway); a push service that
/// says the subscription is gone removes it.
public final class JMAPPushNotifier: Sendable {
    /// Limits of the subscriptions this server accepts.
    public struct Configuration: Sendable {
        /// Whether a subscription without `keys` is accepted. Its pushes are plain JSON, readable by whoever runs
        /// the URL's server, so the default is no (`mailboxd --jmap-push-allow-unencrypted`).
        public var allowsUnencrypted = false
        /// The longest lifetime of a subscription, in seconds; a later `expires` is shortened to it.
        public var maximumLifetime: Double = 7 * 86_400
        /// How long this process trusts the subscriptions it read for an account: subscriptions made through
        /// another instance are seen within this many seconds.
        public var cacheLifetime: Duration = .seconds(5)
        /// The attempts one push gets on transient failures.
        public var attempts = 4

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
        /// The account's subscriptions, as read at `at`.
        var cache: [Int64: (subscriptions: [PushSubscriptionRecord], at: ContinuousClock.Instant)] = [:]
        /// The account modseq each subscription was last told of.
        var told: [String: Int64] = [:]
        /// Accounts changed since the worker last looked, with the lowest modseq among their commits.
        var changed: [Int64: Int64] = [:]
        /// Subscriptions with a push in flight, and the message waiting behind it.
        var inFlight: Set<String> = []
        var waiting: [String: (message: SubscriptionPushMessage, subscription: PushSubscriptionRecord)] = [:]
    }

    let store: MailboxStore
    let service: any SubscriptionPushService
    /// The configuration.
    public let configuration: Configuration
    private let state = LockedValue(State())
    private let wakeup: AsyncStream<Void>.Continuation
    private let worker: LockedValue<Task<Void, Never>?> = LockedValue(nil)
    private let refresher: LockedValue<Task<Void, Never>?> = LockedValue(nil)
    private let log: @Sendable (String) -> Void

    /// Watches `store`'s commits and pushes through `service`. `log` gets one line per subscription removed or
    /// push dropped, never a URL or a key.
    public init(
        store: MailboxStore, service: any SubscriptionPushService, configuration: Configuration = Configuration(),
        log: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.store = store
        self.service = service
        self.configuration = configuration
        self.log = log
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        wakeup = continuation
        store.observeCommittedChanges { [weak self] changes in self?.note(changes) }
        let lifetime = configuration.cacheLifetime
        refresher.withLock { task in
            task = Task { [weak self] in
                while !Task.isCancelled {
                    guard let self else { return }
                    let started = ContinuousClock.now
                    if let accounts = try? await self.store.accountsWithVerifiedPushSubscriptions() {
                        self.state.withLock { state in
                            state.changedHere = state.changedHere.filter { $0.value >= started }
                            state.subscribed = accounts.union(state.changedHere.keys)
                        }
                    }
                    try? await Task.sleep(for: max(lifetime, .milliseconds(100)))
                }
            }
        }
        worker.withLock { task in
            task = Task { [weak self] in
                for await _ in stream {
                    guard let self else { return }
                    await self.tellChangedAccounts()
                }
            }
        }
    }

    /// Stops the worker (pushes in flight finish on their own).
    public func shutdown() {
        wakeup.finish()
        worker.withLock { $0?.cancel() }
        refresher.withLock { $0?.cancel() }
    }

    deinit { shutdown() }

    private func note(_ changes: [CommittedChange]) {
        let relevant = state.withLock { state -> Bool in
            var relevant = false
            for change in changes where state.subscribed.contains(change.accountID) {
                state.changed[change.accountID] = min(state.changed[change.accountID] ?? .max, change.modseq)
                relevant = true
            }
            return relevant
        }
        if relevant { wakeup.yield() }
    }

    /// Drops what this process remembers of the account's subscriptions, after it changed them, and looks at the
    /// account's commits again from now on.
    func forget(accountID: Int64) {
        state.withLock { state in
            state.cache.removeValue(forKey: accountID)
            state.subscribed.insert(accountID)
            state.changedHere[accountID] = ContinuousClock.now
        }
    }

    /// Remembers that `subscription` has been told of the account up to `modseq` (at verification: it starts
    /// from the state it was verified in).
    func told(_ subscriptionID: String, modseq: Int64) {
        state.withLock { $0.told[subscriptionID] = modseq }
    }

    /// The account's subscriptions, from the cache while it is fresh.
    private func subscriptions(accountID: Int64) async throws -> [PushSubscriptionRecord] {
        let now = ContinuousClock.now
        if let cached = state.withLock({ $0.cache[accountID] }), now - cached.at < configuration.cacheLifetime {
            return cached.subscriptions
        }
        let read = try await store.pushSubscriptions(accountID: accountID)
        state.withLock { $0.cache[accountID] = (read, now) }
        return read
    }

    private func tellChangedAccounts() async {
        let changed = state.withLock { state in
            defer { state.changed.removeAll() }
            return state.changed
        }
        for (accountID, lowest) in changed {
            guard let subscriptions = try? await subscriptions(accountID: accountID) else { continue }
            let verified = subscriptions.filter(\.isVerified)
            guard !verified.isEmpty, let counters = try? await store.changeCounters(accountID: accountID) else {
                continue
            }
            let states = TypeStates(counters, epoch: store.epoch)
            for subscription in verified {
                let since = state.withLock { state in
                    defer { state.told[subscription.id] = counters.modseq }
                    return state.told[subscription.id] ?? (lowest - 1)
                }
                let named = states.changed(since: since, of: counters).filter { name, _ in
                    subscription.types?.contains(name) ?? true
                }
                guard !named.isEmpty else { continue }
                send(.stateChange(accountID: String(accountID), states: named), to: subscription)
            }
        }
    }

    /// Sends the PushVerification for a new subscription.
    func verify(_ subscription: PushSubscriptionRecord) {
        send(.verification(subscriptionID: subscription.id, code: subscription.verificationCode), to: subscription)
    }

    /// Sends `message`, or merges it into the one waiting while another is in flight.
    private func send(_ message: SubscriptionPushMessage, to subscription: PushSubscriptionRecord) {
        let startNow = state.withLock { state -> Bool in
            guard state.inFlight.contains(subscription.id) else {
                state.inFlight.insert(subscription.id)
                return true
            }
            let merged = state.waiting[subscription.id].map { Self.merge($0.message, message) } ?? message
            state.waiting[subscription.id] = (merged, subscription)
            return false
        }
        guard startNow else { return }
        Task { [weak self] in
            var next: (message: SubscriptionPushMessage, subscription: PushSubscriptionRecord)? = (
                message, subscription
            )
            while let (message, subscription) = next {
                guard let self else { return }
                await self.deliver(message, to: subscription)
                next = self.state.withLock { state in
                    guard let waiting = state.waiting.removeValue(forKey: subscription.id) else {
                        state.inFlight.remove(subscription.id)
                        return nil
                    }
                    return waiting
                }
            }
        }
    }

    /// A StateChange waiting behind another keeps every type either names, with the newer state.
    static func merge(_ older: SubscriptionPushMessage, _ newer: SubscriptionPushMessage) -> SubscriptionPushMessage {
        guard case .stateChange(let account, let old) = older, case .stateChange(account, let new) = newer else {
            return newer
        }
        return .stateChange(accountID: account, states: old.merging(new) { _, newer in newer })
    }

    /// One push with its retries.
    private func deliver(_ message: SubscriptionPushMessage, to subscription: PushSubscriptionRecord) async {
        let topic = Self.topic(for: subscription.id)
        var delay = 1.0
        for attempt in 1...max(1, configuration.attempts) {
            switch await service.push(message, url: subscription.url, keys: subscription.keys, topic: topic) {
            case .delivered:
                return
            case .dropRegistration(let reason, _):
                _ = try? await store.deletePushSubscription(id: subscription.id, accountID: subscription.accountID)
                forget(accountID: subscription.accountID)
                log("mailboxd: JMAP push subscription removed (\(reason))")
                return
            case .defect(let reason):
                log("mailboxd: JMAP push not sent (\(reason))")
                return
            case .retry(let reason, let retryAfter):
                guard attempt < configuration.attempts else {
                    log("mailboxd: JMAP push dropped after \(attempt) attempts (\(reason))")
                    return
                }
                try? await Task.sleep(for: .seconds(min(max(retryAfter ?? delay, delay), 300)))
                delay *= 2
            }
        }
    }

    /// The RFC 8030 `Topic` of a subscription's pushes: a constant per subscription that names nothing else, so a
    /// push service holding an older StateChange for an offline client replaces it.
    static func topic(for subscriptionID: String) -> String {
        String(Base64URL.encode(SHA256.hash("signalfetch-jmap-topic:" + subscriptionID)).prefix(32))
    }
}
