/// What asked for a sync.
public enum SyncTrigger: Sendable, Equatable, CustomStringConvertible {
    /// A push signal arrived; `state` is its `st` key, when it had one: the tag of a state under the device's
    /// signal key (see ``SignalTagger``), or a state itself for an engine without a tagger.
    case signal(state: String?)
    /// The app started.
    case launch
    /// The fallback timer fired (signals are not guaranteed to arrive).
    case timer
    /// The user or the app asked explicitly.
    case manual
    /// The server's event stream announced a change while the app is awake (see ``LiveSync``); `state` is the
    /// event's id, the account's state after the change, compared with the local state itself.
    case change(state: String?)

    /// `signal`, `launch`, `timer`, `manual` or `change`.
    public var description: String {
        switch self {
        case .signal: "signal"
        case .launch: "launch"
        case .timer: "timer"
        case .manual: "manual"
        case .change: "change"
        }
    }

    /// Whether the sync it starts runs against a deadline (a signal-started background fetch).
    public var hasDeadline: Bool {
        if case .signal = self { return true }
        return false
    }
}

/// The answer an app gives the system at the end of a background fetch.
public enum BackgroundFetchResult: String, Sendable, Equatable {
    /// New data was downloaded.
    case newData
    /// Nothing changed.
    case noData
    /// The fetch failed.
    case failed
}

/// How a sync run ended.
public enum SyncOutcome: Sendable, Equatable {
    /// Every change was applied: the cache is at the server's state as of the last page.
    case completed
    /// The trigger was ignored: a signal carried the state the cache already has.
    case skipped
    /// The deadline passed; pages applied before it stay applied.
    case deadlineExceeded
    /// The run stopped on an error; pages applied before it stay applied.
    case failed(MailSyncError)
}

/// What one sync run did.
public struct SyncReport: Sendable, Equatable {
    /// Whether the run replaced the whole cache (first run, or the server could not calculate changes).
    public var fullResync: Bool
    /// The number of change pages (or, for a full resync, listings) applied.
    public var pages: Int
    /// Messages added to the cache.
    public var created: Int
    /// Messages changed in the cache.
    public var updated: Int
    /// Messages removed from the cache.
    public var destroyed: Int
    /// The local state when the run ended.
    public var state: String?
    /// How the run ended.
    public var outcome: SyncOutcome

    /// Creates a report.
    public init(
        fullResync: Bool = false, pages: Int = 0, created: Int = 0, updated: Int = 0, destroyed: Int = 0,
        state: String? = nil, outcome: SyncOutcome = .completed
    ) {
        self.fullResync = fullResync
        self.pages = pages
        self.created = created
        self.updated = updated
        self.destroyed = destroyed
        self.state = state
        self.outcome = outcome
    }

    /// Whether the run changed the cache.
    public var changedCache: Bool { created + updated + destroyed > 0 }

    /// The result to hand back to the system: `.newData` whenever the cache changed (even if the run then
    /// failed or ran out of time, since applied pages stay applied), `.noData` for a complete or skipped
    /// run that changed nothing, `.failed` otherwise.
    public var fetchResult: BackgroundFetchResult {
        if changedCache { return .newData }
        switch outcome {
        case .completed, .skipped: return .noData
        case .deadlineExceeded, .failed: return .failed
        }
    }

    mutating func add(_ counts: ChangeCounts) {
        created += counts.created
        updated += counts.updated
        destroyed += counts.destroyed
    }
}

/// The sync client's exponential backoff for retryable failures (network errors, 429 and 5xx); the APNs
/// provider's classification of answers is `APNs.RetryPolicy`, a different job.
public struct SyncRetryPolicy: Sendable, Equatable {
    /// The delay before the first retry.
    public var initialDelay: Duration
    /// The factor applied to the delay after each failed attempt.
    public var multiplier: Double
    /// The longest delay between two attempts (a server's `Retry-After` may ask for more).
    public var maximumDelay: Duration
    /// How many consecutive failures a run tolerates before it ends as failed.
    public var maximumAttempts: Int

    /// Creates a policy; the defaults retry after 0.5 s, 1 s, 2 s, 4 s, 8 s and then give up.
    public init(
        initialDelay: Duration = .milliseconds(500), multiplier: Double = 2, maximumDelay: Duration = .seconds(60),
        maximumAttempts: Int = 5
    ) {
        self.initialDelay = initialDelay
        self.multiplier = multiplier
        self.maximumDelay = maximumDelay
        self.maximumAttempts = maximumAttempts
    }

    /// The delay before retry number `attempt` (1-based), at least `retryAfter` when the server sent one.
    public func delay(forAttempt attempt: Int, retryAfter: Duration? = nil) -> Duration {
        var delay = initialDelay
        for _ in 1..<max(attempt, 1) {
            delay = delay * multiplier
            if delay >= maximumDelay { break }
        }
        delay = min(delay, maximumDelay)
        if let retryAfter, retryAfter > delay { delay = retryAfter }
        return delay
    }
}
