/// Keeps an awake app's cache current from the server's event stream: it holds the stream, asks the
/// ``SyncEngine`` for a sync on each announced change at once, and reopens the stream when it drops. Pushes are
/// for waking the app; while the stream is down they still drive sync through the engine as before.
///
/// ```swift
/// let live = LiveSync(transport: transport, engine: engine)
/// await live.start()        // when the app comes to the foreground
/// await live.stop()         // when it goes to the background
/// ```
///
/// The rules are ``LiveSyncStateMachine``'s; the syncs are the engine's, so triggers arriving during a run still
/// collapse into one follow-up, however fast the changes come.
public actor LiveSync {
    /// Tuning of a ``LiveSync``.
    public struct Configuration: Sendable {
        /// The keep-alive interval asked of the server (JMAP servers may raise it; mailboxd takes at least 5 s).
        public var pingInterval: Duration
        /// How long the stream may stay silent (no change, no ping) before it is taken for dead and reopened.
        public var silenceLimit: Duration
        /// The backoff between attempts to reopen the stream.
        public var retryPolicy: SyncRetryPolicy
        /// Whether backoff delays are randomized (between half and all of the policy's delay).
        public var jitter: Bool

        /// Creates a configuration; by default a silence of two pings and 5 s more means a dead stream.
        public init(
            pingInterval: Duration = .seconds(15), silenceLimit: Duration? = nil,
            retryPolicy: SyncRetryPolicy = LiveSyncStateMachine.defaultRetryPolicy, jitter: Bool = true
        ) {
            self.pingInterval = pingInterval
            self.silenceLimit = silenceLimit ?? pingInterval * 2 + .seconds(5)
            self.retryPolicy = retryPolicy
            self.jitter = jitter
        }
    }

    /// The events, for one consumer. The stream ends when the follower is released.
    public nonisolated let events: AsyncStream<LiveSyncEvent>
    private let eventSink: AsyncStream<LiveSyncEvent>.Continuation
    private let transport: any ChangeStreamTransport
    private let engine: SyncEngine
    private let configuration: Configuration
    private var machine: LiveSyncStateMachine
    private var runner: Task<Void, Never>?
    /// Counts runners, so one cancelled by ``stop()`` cannot feed the machine of the next ``start()``.
    private var generation = 0
    private var lastHeard = ContinuousClock.now

    /// Creates a follower that feeds `engine` from `transport`'s event stream; it does nothing until ``start()``.
    public init(
        transport: any ChangeStreamTransport, engine: SyncEngine, configuration: Configuration = Configuration()
    ) {
        self.transport = transport
        self.engine = engine
        self.configuration = configuration
        machine = LiveSyncStateMachine(retryPolicy: configuration.retryPolicy)
        (events, eventSink) = AsyncStream.makeStream(of: LiveSyncEvent.self, bufferingPolicy: .unbounded)
    }

    deinit {
        runner?.cancel()
        eventSink.finish()
    }

    /// Whether the stream is open now.
    public var isConnected: Bool { machine.isOpen }

    /// Starts holding the stream (without waiting for it to open).
    public func start() async {
        let action = machine.start(localState: await engine.localState)
        perform(action)
    }

    /// Closes the stream and stops reopening it; a later ``start()`` begins again.
    public func stop() {
        runner?.cancel()
        runner = nil
        generation += 1
        machine = LiveSyncStateMachine(retryPolicy: configuration.retryPolicy)
    }

    /// Reopens a stream that the server refused with 401, once the transport has new credentials.
    public func credentialsRenewed() async {
        let action = machine.credentialsRenewed(localState: await engine.localState)
        perform(action)
    }

    // MARK: - Running the machine

    private func perform(_ action: LiveSyncStateMachine.Action) {
        guard case .connect = action else { return }
        runner?.cancel()
        generation += 1
        let current = generation
        runner = Task { await self.run(action, generation: current) }
    }

    private func run(_ first: LiveSyncStateMachine.Action, generation current: Int) async {
        var action = first
        while !Task.isCancelled && current == generation {
            switch action {
            case .connect(let lastEventID):
                action = await follow(lastEventID: lastEventID, generation: current)
            case .reconnect(let after, let attempt, let error):
                let wait = configuration.jitter ? after * Double.random(in: 0.5...1.0) : after
                eventSink.yield(.lost(error, attempt: attempt, retryIn: wait))
                do { try await Task.sleep(for: wait) } catch { return }
                let localState = await engine.localState
                guard current == generation else { return }
                action = machine.retryDue(localState: localState)
            case .stop(let error):
                eventSink.yield(.stopped(error))
                return
            case .sync, .none:
                return
            }
        }
    }

    /// Opens the stream and reads it until it ends; returns the machine's next action.
    private func follow(lastEventID: String?, generation current: Int) async -> LiveSyncStateMachine.Action {
        let notices: AsyncThrowingStream<ChangeNotice, any Error>
        do {
            notices = try await transport.openChangeStream(
                lastEventID: lastEventID, pingInterval: configuration.pingInterval)
        } catch {
            guard !Task.isCancelled, current == generation else { return .none }
            return machine.closed(Self.failure(error))
        }
        guard !Task.isCancelled, current == generation else { return .none }
        _ = machine.opened()
        lastHeard = .now
        eventSink.yield(.connected)
        let silenceLimit = configuration.silenceLimit
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await notice in notices { await self.receive(notice, generation: current) }
                }
                group.addTask {
                    while true {
                        let deadline = await self.lastHeard.advanced(by: silenceLimit)
                        try await Task.sleep(until: deadline)
                        if await self.lastHeard.advanced(by: silenceLimit) <= .now { throw Silence() }
                    }
                }
                // The first child to end ends the stream: the reader when it closes, the watchdog on silence.
                defer { group.cancelAll() }
                try await group.next()
            }
        } catch is Silence {
            guard current == generation else { return .none }
            return machine.closed(.network("the event stream was silent for \(silenceLimit)"))
        } catch {
            guard !Task.isCancelled, current == generation else { return .none }
            return machine.closed(Self.failure(error))
        }
        guard !Task.isCancelled, current == generation else { return .none }
        return machine.closed(nil)
    }

    private func receive(_ notice: ChangeNotice, generation current: Int) async {
        guard current == generation else { return }
        lastHeard = .now
        if case .sync(let state) = machine.received(notice) {
            await engine.request(.change(state: state))
        }
    }

    private struct Silence: Error {}

    private static func failure(_ error: any Error) -> MailSyncError {
        if let error = error as? MailSyncError { return error }
        if error is CancellationError { return .network("cancelled") }
        return .network(String(describing: type(of: error)))
    }
}
