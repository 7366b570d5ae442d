import Foundation

/// Runs a ``SyncStateMachine`` against a transport and a cache, and reports ``SyncEvent``s.
///
/// ```swift
/// let engine = try SyncEngine(transport: transport, cache: cache)
/// await engine.start()                                         // launch sync + fallback timer
/// let result = await engine.sync(.signal(state: st)).fetchResult  // in the push handler
/// ```
public actor SyncEngine {
    /// Tuning of a ``SyncEngine``.
    public struct Configuration: Sendable {
        /// How long a signal-started run may take (an app's background fetch budget).
        public var signalDeadline: Duration
        /// `max` sent with each `GET /v1/changes`.
        public var changesPageSize: Int
        /// `limit` sent with each `GET /v1/messages` during a full resync.
        public var listingPageSize: Int
        /// Backoff for retryable failures.
        public var retryPolicy: SyncRetryPolicy
        /// How often ``SyncEngine/start()``'s timer syncs, in case signals are lost; `nil` for no timer.
        public var fallbackInterval: Duration?
        /// Whether retry delays are randomized (between half and all of the policy's delay).
        public var jitter: Bool

        /// Creates a configuration; the defaults suit an app in the background.
        public init(
            signalDeadline: Duration = .seconds(25), changesPageSize: Int = 100, listingPageSize: Int = 200,
            retryPolicy: SyncRetryPolicy = SyncRetryPolicy(), fallbackInterval: Duration? = nil, jitter: Bool = true
        ) {
            self.signalDeadline = signalDeadline
            self.changesPageSize = changesPageSize
            self.listingPageSize = listingPageSize
            self.retryPolicy = retryPolicy
            self.fallbackInterval = fallbackInterval
            self.jitter = jitter
        }
    }

    /// The events, for one consumer. The stream ends when the engine is released.
    public nonisolated let events: AsyncStream<SyncEvent>
    private let eventSink: AsyncStream<SyncEvent>.Continuation
    private let transport: any MailTransport
    private let cache: any MailCacheStore
    private let configuration: Configuration
    private var machine: SyncStateMachine

    private var current = Batch()
    private var followUp = Batch()
    private var runStarted = ContinuousClock.now
    private var driver: Task<Void, Never>?
    private var fallbackTimer: Task<Void, Never>?

    /// The triggers served by one run and the callers waiting for it.
    private struct Batch {
        var trigger: SyncTrigger = .manual
        var deadline: ContinuousClock.Instant?
        var waiters: [CheckedContinuation<SyncReport, Never>] = []

        mutating func add(_ trigger: SyncTrigger, deadline budget: Duration) {
            if waiters.isEmpty && self.deadline == nil { self.trigger = trigger }
            if trigger.hasDeadline {
                let candidate = ContinuousClock.now.advanced(by: budget)
                deadline = deadline.map { min($0, candidate) } ?? candidate
            }
        }
    }

    /// Compares signals' `st` with the tag of the local state under `tagger` from now on (after a device
    /// registration returned its signal key); `nil` compares states themselves.
    public func useSignalTagger(_ tagger: SignalTagger?) {
        machine.tagger = tagger
    }

    /// Creates an engine over `cache`, starting from the state the cache holds.
    public init(
        transport: any MailTransport, cache: any MailCacheStore, configuration: Configuration = Configuration()
    ) throws {
        self.transport = transport
        self.cache = cache
        self.configuration = configuration
        let localState: String?
        do { localState = try cache.state() } catch { throw MailSyncError.cache(String(describing: error)) }
        machine = SyncStateMachine(localState: localState, retryPolicy: configuration.retryPolicy)
        (events, eventSink) = AsyncStream.makeStream(of: SyncEvent.self, bufferingPolicy: .unbounded)
    }

    deinit {
        fallbackTimer?.cancel()
        driver?.cancel()
        eventSink.finish()
    }

    /// The state of the local cache as the engine knows it.
    public var localState: String? { machine.localState }

    /// Whether a run is in progress.
    public var isSyncing: Bool { machine.isSyncing }

    /// Starts a launch sync (without waiting for it) and the fallback timer, when one is configured.
    public func start() {
        Task { await self.sync(.launch) }
        guard let interval = configuration.fallbackInterval, fallbackTimer == nil else { return }
        fallbackTimer = Task { [weak self] in
            while !Task.isCancelled {
                do { try await Task.sleep(for: interval) } catch { return }
                guard let self else { return }
                _ = await self.sync(.timer)
            }
        }
    }

    /// Stops the fallback timer; a run in progress finishes normally.
    public func stopFallbackTimer() {
        fallbackTimer?.cancel()
        fallbackTimer = nil
    }

    /// Asks for a sync and waits for the run that serves the request; returns its report.
    ///
    /// A signal carrying the local state returns at once with outcome ``SyncOutcome/skipped``; a request
    /// made while a run is in progress is served by the one follow-up run after it.
    @discardableResult
    public func sync(_ trigger: SyncTrigger) async -> SyncReport {
        // No suspension between admitting the trigger and registering the waiter: the run cannot end in between.
        switch admit(trigger) {
        case .rejected(let error):
            return SyncReport(state: machine.localState, outcome: .failed(error))
        case .joinedFollowUp:
            return await withCheckedContinuation { followUp.waiters.append($0) }
        case .startSync:
            return await withCheckedContinuation { current.waiters.append($0) }
        default:
            return SyncReport(state: machine.localState, outcome: .skipped)
        }
    }

    /// Asks for a sync without waiting for it, as the server's event stream does for each change: a run starts,
    /// or the one follow-up after the running run is kept, so however often it is called nothing queues.
    public func request(_ trigger: SyncTrigger) {
        admit(trigger)
    }

    /// Feeds `trigger` to the machine and starts the run or joins the follow-up it decides on.
    @discardableResult
    private func admit(_ trigger: SyncTrigger) -> SyncStateMachine.Action {
        let action = machine.trigger(trigger)
        switch action {
        case .skip:
            eventSink.yield(.skipped(trigger))
        case .joinedFollowUp:
            followUp.add(trigger, deadline: configuration.signalDeadline)
        case .startSync(let step):
            current = Batch()
            current.add(trigger, deadline: configuration.signalDeadline)
            driver = Task { await self.drive(.startSync(step)) }
        default:
            break
        }
        return action
    }

    /// Convenience for a push handler: syncs for a signal carrying `state` and returns the result to hand
    /// back to the system.
    public func handleSignal(state: String?) async -> BackgroundFetchResult {
        await sync(.signal(state: state)).fetchResult
    }

    /// Resumes syncing after a 401 once the transport has new credentials.
    public func credentialsRenewed() {
        _ = machine.credentialsRenewed()
    }

    // MARK: - Running the machine

    private func drive(_ first: SyncStateMachine.Action) async {
        var action = first
        while true {
            switch action {
            case .startSync(let step):
                runStarted = .now
                eventSink.yield(.syncStarted(trigger: current.trigger, fullResync: step == .fullResync))
                action = await perform(step)
            case .continueSync(let step):
                action = await perform(step)
            case .retry(_, let after, let attempt):
                action = await waitForRetry(after: after, attempt: attempt)
            case .finish(let report, let next):
                finishRun(report, followUpStep: next)
                guard let next else {
                    driver = nil
                    return
                }
                action = .startSync(next)
            case .none, .skip, .joinedFollowUp, .rejected:
                driver = nil
                return
            }
        }
    }

    private func finishRun(_ report: SyncReport, followUpStep: SyncStateMachine.Step?) {
        let count = (try? cache.messageCount()) ?? 0
        eventSink.yield(.syncFinished(report, messageCount: count, duration: ContinuousClock.now - runStarted))
        let served = current.waiters
        if followUpStep != nil {
            current = followUp
        } else {
            current = Batch()
            served.forEach { $0.resume(returning: report) }
            followUp.waiters.forEach { $0.resume(returning: report) }
            followUp = Batch()
            return
        }
        followUp = Batch()
        served.forEach { $0.resume(returning: report) }
    }

    private func waitForRetry(after delay: Duration, attempt: Int) async -> SyncStateMachine.Action {
        var wait = delay
        if configuration.jitter { wait = delay * Double.random(in: 0.5...1.0) }
        if case .running = machine.phase, let error = lastError {
            eventSink.yield(.retrying(attempt: attempt, delay: wait, error: error))
        }
        if let deadline = current.deadline, ContinuousClock.now.advanced(by: wait) >= deadline {
            try? await Task.sleep(until: deadline)
            return machine.deadlineExpired()
        }
        try? await Task.sleep(for: wait)
        return machine.retryDue()
    }

    private var lastError: MailSyncError?

    private func perform(_ step: SyncStateMachine.Step) async -> SyncStateMachine.Action {
        if let deadline = current.deadline, ContinuousClock.now >= deadline { return machine.deadlineExpired() }
        do {
            switch step {
            case .fetchChanges(let since):
                let transport = self.transport
                let max = configuration.changesPageSize
                let changes = try await withDeadline(current.deadline) {
                    try await transport.fetchChanges(since: since, max: max)
                }
                let counts: ChangeCounts
                do { counts = try cache.apply(changes) } catch { throw MailSyncError.cache(String(describing: error)) }
                return machine.changesApplied(newState: changes.newState, hasMore: changes.hasMore, counts: counts)
            case .fullResync:
                let (messages, state) = try await fetchListing()
                let counts: ChangeCounts
                do {
                    counts = try cache.replaceAll(with: messages, state: state)
                } catch {
                    throw MailSyncError.cache(String(describing: error))
                }
                return machine.fullResyncApplied(state: state, counts: counts)
            }
        } catch is DeadlineExceeded {
            return machine.deadlineExpired()
        } catch let error as MailSyncError {
            lastError = error
            return machine.stepFailed(error)
        } catch is CancellationError {
            lastError = .network("cancelled")
            return machine.stepFailed(.network("cancelled"))
        } catch {
            let failure = MailSyncError.network(String(describing: type(of: error)))
            lastError = failure
            return machine.stepFailed(failure)
        }
    }

    private func fetchListing() async throws -> ([MailMessage], String) {
        let transport = self.transport
        let limit = configuration.listingPageSize
        var messages: [MailMessage] = []
        var state: String?
        var cursor: String?
        repeat {
            let requested = cursor
            let page = try await withDeadline(current.deadline) {
                try await transport.fetchAllMessages(cursor: requested, limit: limit)
            }
            if state == nil { state = page.state }
            messages.append(contentsOf: page.messages)
            if page.nextCursor != nil, page.nextCursor == requested {
                throw MailSyncError.invalidResponse("listing cursor did not advance")
            }
            cursor = page.nextCursor
        } while cursor != nil
        return (messages, state!)
    }

    // MARK: - Messages

    /// The cached messages, newest first; only those in `mailbox` when given.
    public func messages(in mailbox: MailboxID? = nil) throws -> [MailMessage] {
        do { return try cache.messages(in: mailbox) } catch { throw MailSyncError.cache(String(describing: error)) }
    }

    /// The body of a message: from the cache when it is there, else fetched from the server (bodies above
    /// ``MailMessage/inlineBodyLimit`` are fetched on demand) and stored in the cache.
    public func body(ofMessage id: String) async throws -> String {
        if let body = try cachedMessage(id)?.body { return body }
        let message = try await transport.fetchMessage(id: id)
        let body = message.body ?? ""
        do { try cache.storeBody(body, forMessageID: id) } catch {
            throw MailSyncError.cache(String(describing: error))
        }
        return body
    }

    /// Changes a message on the server and stores the server's copy locally (the state is left alone:
    /// the next sync brings the same change).
    @discardableResult
    public func update(messageID id: String, _ update: MessageUpdate) async throws -> MailMessage {
        let message = try await transport.updateMessage(id: id, update)
        do { try cache.upsert(message) } catch { throw MailSyncError.cache(String(describing: error)) }
        return message
    }

    /// Destroys a message on the server and removes it locally.
    public func delete(messageID id: String) async throws {
        do {
            try await transport.deleteMessage(id: id)
        } catch MailSyncError.notFound {
            // Already gone on the server: remove it locally all the same.
        }
        do { try cache.remove(messageID: id) } catch { throw MailSyncError.cache(String(describing: error)) }
    }

    private func cachedMessage(_ id: String) throws -> MailMessage? {
        do { return try cache.message(id: id) } catch { throw MailSyncError.cache(String(describing: error)) }
    }
}

/// Thrown inside the engine when a run's deadline passes during a step.
struct DeadlineExceeded: Error {}

/// Runs `operation`, abandoning (cancelling) it when `deadline` passes first.
func withDeadline<T: Sendable>(
    _ deadline: ContinuousClock.Instant?, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    guard let deadline else { return try await operation() }
    return try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(until: deadline)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else { throw DeadlineExceeded() }
        return value
    }
}
