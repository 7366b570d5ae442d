/// The sync life cycle as a value: feed it events, perform the action it returns.
///
/// Rules:
/// - a signal whose `st` matches the local state is skipped (with a ``SignalTagger``, `st` is the tag of a state
///   and is compared with the tag of the local state; without one, with the state itself); so is a change
///   announced by the server's event stream whose state is the local state;
/// - triggers arriving while a sync runs collapse into one follow-up run (skipped at the end if every
///   trigger was a signal or an announced change whose state has been reached meanwhile); however many arrive,
///   the follow-up remembers at most the signals' distinct states and the newest announced state;
/// - the first run, or a server that cannot calculate changes from the local state, means a full resync;
///   otherwise changes are paged until `hasMore` is false, each page applied on its own;
/// - network errors, 429 and 5xx are retried with backoff, resuming from the last applied state;
/// - 401 stops syncing until ``credentialsRenewed()``;
/// - a deadline ends the run; pages applied before it stay applied.
///
/// The caller owns time and I/O: it performs ``Action/startSync(_:)`` and ``Action/continueSync(_:)``
/// steps, sleeps on ``Action/retry(_:after:attempt:)``, and reports back with the event methods.
public struct SyncStateMachine: Sendable, Equatable {
    /// One unit of sync work.
    public enum Step: Sendable, Equatable {
        /// Fetch and apply one page of changes since the given state.
        case fetchChanges(since: String)
        /// Fetch the whole listing and replace the cache with it.
        case fullResync
    }

    /// What the caller must do next.
    public enum Action: Sendable, Equatable {
        /// Nothing (the event did not apply to the current phase).
        case none
        /// The trigger is ignored: its signal carried the local state.
        case skip
        /// The trigger will be served by the follow-up run after the running one.
        case joinedFollowUp
        /// The trigger is refused: syncing stopped on this error (401) until ``credentialsRenewed()``.
        case rejected(MailSyncError)
        /// Begin a run with this step.
        case startSync(Step)
        /// Perform the next step of the running sync.
        case continueSync(Step)
        /// Wait `after`, then call ``retryDue()``; `attempt` counts consecutive failures.
        case retry(Step, after: Duration, attempt: Int)
        /// The run ended with this report; when `followUp` is set a new run starts at once with that step.
        case finish(SyncReport, followUp: Step?)
    }

    enum Phase: Sendable, Equatable {
        case idle
        case running(Run)
        case stopped(MailSyncError)
    }

    struct Run: Sendable, Equatable {
        var step: Step
        var failures = 0
        var report = SyncReport()
        var followUp: FollowUp?
    }

    struct FollowUp: Sendable, Equatable {
        var signalStates: Set<String> = []
        /// The newest state the event stream announced (events arrive in order, so it covers the earlier ones).
        var announcedState: String?
        var unconditional = false
    }

    private(set) var phase: Phase = .idle
    /// The state of the local cache as far as the machine knows.
    public private(set) var localState: String?
    /// The backoff used for retryable failures.
    public var retryPolicy: SyncRetryPolicy
    /// How signals name states: by tag under the device's key, or (`nil`) by the state itself.
    public var tagger: SignalTagger?

    /// Creates a machine for a cache currently at `localState` (`nil` before the first sync).
    public init(localState: String?, retryPolicy: SyncRetryPolicy = SyncRetryPolicy()) {
        self.localState = localState
        self.retryPolicy = retryPolicy
    }

    /// Whether a run is in progress.
    public var isSyncing: Bool {
        if case .running = phase { return true }
        return false
    }

    /// Whether a follow-up run is queued behind the running one.
    public var hasFollowUp: Bool {
        if case .running(let run) = phase { return run.followUp != nil }
        return false
    }

    /// The error that stopped syncing, if it is stopped.
    public var stoppedBy: MailSyncError? {
        if case .stopped(let error) = phase { return error }
        return nil
    }

    /// The step the running sync is at.
    public var currentStep: Step? {
        if case .running(let run) = phase { return run.step }
        return nil
    }

    private var firstStep: Step { localState.map { .fetchChanges(since: $0) } ?? .fullResync }

    /// Whether a signal's `st` names the local state.
    private func matchesLocalState(_ mark: String) -> Bool {
        guard let localState else { return false }
        return mark == (tagger?.tag(of: localState) ?? localState)
    }

    /// Whether `trigger` names the local state: a signal by its `st`, an announced change by its state.
    private func isReached(_ trigger: SyncTrigger) -> Bool {
        switch trigger {
        case .signal(let mark?): matchesLocalState(mark)
        case .change(let state?): localState != nil && state == localState
        default: false
        }
    }

    /// Something asks for a sync.
    public mutating func trigger(_ trigger: SyncTrigger) -> Action {
        switch phase {
        case .stopped(let error):
            return .rejected(error)
        case .idle:
            if isReached(trigger) { return .skip }
            let step = firstStep
            phase = .running(Run(step: step))
            return .startSync(step)
        case .running(var run):
            if isReached(trigger) { return .skip }
            var followUp = run.followUp ?? FollowUp()
            switch trigger {
            case .signal(let state?): followUp.signalStates.insert(state)
            case .change(let state?): followUp.announcedState = state
            default: followUp.unconditional = true
            }
            run.followUp = followUp
            phase = .running(run)
            return .joinedFollowUp
        }
    }

    /// A page of changes was applied: the cache is now at `newState`.
    public mutating func changesApplied(newState: String, hasMore: Bool, counts: ChangeCounts) -> Action {
        guard case .running(var run) = phase, case .fetchChanges(let since) = run.step else { return .none }
        localState = newState
        run.report.pages += 1
        run.report.add(counts)
        run.failures = 0
        guard hasMore else {
            phase = .running(run)
            return finish(.completed)
        }
        guard newState != since else {
            phase = .running(run)
            return finish(.failed(.invalidResponse("changes reported more to come without advancing the state")))
        }
        run.step = .fetchChanges(since: newState)
        phase = .running(run)
        return .continueSync(run.step)
    }

    /// A full resync replaced the cache: it is now at `state`.
    public mutating func fullResyncApplied(state: String, counts: ChangeCounts) -> Action {
        guard case .running(var run) = phase, run.step == .fullResync else { return .none }
        localState = state
        run.report.fullResync = true
        run.report.pages += 1
        run.report.add(counts)
        run.failures = 0
        phase = .running(run)
        return finish(.completed)
    }

    /// The current step failed with `error`.
    public mutating func stepFailed(_ error: MailSyncError) -> Action {
        guard case .running(var run) = phase else { return .none }
        switch error {
        case .unauthorized:
            run.followUp = nil
            phase = .running(run)
            let action = finish(.failed(.unauthorized))
            phase = .stopped(.unauthorized)
            return action
        case .cannotCalculateChanges, .invalidState:
            guard case .fetchChanges = run.step else { break }
            run.step = .fullResync
            run.failures = 0
            run.report.fullResync = true
            phase = .running(run)
            return .continueSync(.fullResync)
        default:
            break
        }
        guard error.isRetryable else { return finish(.failed(error)) }
        run.failures += 1
        guard run.failures <= retryPolicy.maximumAttempts else {
            phase = .running(run)
            return finish(.failed(error))
        }
        phase = .running(run)
        var retryAfter: Duration?
        if case .server(_, _, let after) = error { retryAfter = after }
        return .retry(
            run.step, after: retryPolicy.delay(forAttempt: run.failures, retryAfter: retryAfter), attempt: run.failures)
    }

    /// The backoff delay of a ``Action/retry(_:after:attempt:)`` has passed.
    public mutating func retryDue() -> Action {
        guard case .running(let run) = phase else { return .none }
        return .continueSync(run.step)
    }

    /// The running sync's deadline passed (its in-flight step was abandoned).
    public mutating func deadlineExpired() -> Action {
        guard case .running = phase else { return .none }
        return finish(.deadlineExceeded)
    }

    /// New credentials are available: syncing may resume (the caller usually triggers a sync next).
    public mutating func credentialsRenewed() -> Action {
        if case .stopped = phase { phase = .idle }
        return .none
    }

    private mutating func finish(_ outcome: SyncOutcome) -> Action {
        guard case .running(let run) = phase else { return .none }
        var report = run.report
        report.state = localState
        report.outcome = outcome
        if let followUp = run.followUp,
            followUp.unconditional || followUp.signalStates.contains(where: { !matchesLocalState($0) })
                || followUp.announcedState.map({ $0 != localState }) == true
        {
            let step = firstStep
            phase = .running(Run(step: step))
            return .finish(report, followUp: step)
        }
        phase = .idle
        return .finish(report, followUp: nil)
    }
}
