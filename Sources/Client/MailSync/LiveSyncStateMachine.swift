/// The life cycle of the server's event stream while an app is awake, as a value: feed it events, perform the
/// action it returns (``LiveSync`` is the shell that does).
///
/// Rules:
/// - the stream is opened with `Last-Event-ID` naming the local state when the cache has one (an event's id is
///   the account's state), else the last event id seen, so the server announces at once whatever the device has
///   not synced yet;
/// - each announced change asks for a sync (``Action/sync(state:)``); a ping only proves the stream alive;
/// - a stream that cannot be opened, fails, ends or goes silent is reopened after the retry policy's backoff,
///   counted in failures since the last event (so a server that accepts and closes at once is not hammered);
///   attempts never run out: while the stream is down, pushes drive sync as before;
/// - 401 stops following until ``credentialsRenewed(localState:)``; a refusal that retrying cannot change (404:
///   the server has no event stream; another 4xx) stops it for good.
public struct LiveSyncStateMachine: Sendable, Equatable {
    /// What the caller must do next.
    public enum Action: Sendable, Equatable {
        /// Nothing (the event did not apply to the current phase).
        case none
        /// Open the stream, sending `lastEventID` as `Last-Event-ID` when there is one; then report
        /// ``opened()`` or ``closed(_:)``.
        case connect(lastEventID: String?)
        /// Ask the engine for a sync of the change to `state` (``SyncTrigger/change(state:)``); do not wait for it.
        case sync(state: String?)
        /// Wait `after`, then call ``retryDue(localState:)``; `attempt` counts consecutive failures and `error`
        /// says why the stream is down.
        case reconnect(after: Duration, attempt: Int, error: MailSyncError)
        /// Following stopped on `error`; pushes alone drive sync from now on.
        case stop(MailSyncError)
    }

    enum Phase: Sendable, Equatable {
        case idle
        case connecting
        case open
        case waiting
        case stopped(MailSyncError)
    }

    /// The stream's default backoff: 0.5 s doubling up to 30 s (its attempt limit is not used: the stream is
    /// reopened for as long as the app is awake).
    public static let defaultRetryPolicy = SyncRetryPolicy(
        initialDelay: .milliseconds(500), multiplier: 2, maximumDelay: .seconds(30))

    private(set) var phase: Phase = .idle
    /// The id of the last change event received.
    public private(set) var lastEventID: String?
    /// Consecutive failures since the last event.
    public private(set) var failures = 0
    /// The backoff between attempts to reopen the stream.
    public var retryPolicy: SyncRetryPolicy

    /// Creates a machine that has not connected yet.
    public init(retryPolicy: SyncRetryPolicy = LiveSyncStateMachine.defaultRetryPolicy) {
        self.retryPolicy = retryPolicy
    }

    /// Whether the stream is open.
    public var isOpen: Bool { phase == .open }

    /// The error that stopped following, if it is stopped.
    public var stoppedBy: MailSyncError? {
        if case .stopped(let error) = phase { return error }
        return nil
    }

    /// Start following; `localState` is the cache's state, if it has one.
    public mutating func start(localState: String?) -> Action {
        guard phase == .idle else { return .none }
        return connect(localState: localState)
    }

    /// The server accepted the stream.
    public mutating func opened() -> Action {
        guard phase == .connecting else { return .none }
        phase = .open
        return .none
    }

    /// An event arrived on the open stream.
    public mutating func received(_ notice: ChangeNotice) -> Action {
        guard phase == .open else { return .none }
        failures = 0
        switch notice {
        case .changed(let state):
            if let state { lastEventID = state }
            return .sync(state: state)
        case .ping:
            return .none
        }
    }

    /// The stream could not be opened, or it ended: with `error`, or (`nil`) closed by the server.
    public mutating func closed(_ error: MailSyncError?) -> Action {
        guard phase == .connecting || phase == .open else { return .none }
        let reason = error ?? .network("the event stream ended")
        var retryAfter: Duration?
        switch reason {
        case .network, .invalidResponse:
            break
        case .server(let status, _, let after) where status == 429 || status >= 500:
            retryAfter = after
        default:
            phase = .stopped(reason)
            return .stop(reason)
        }
        failures += 1
        phase = .waiting
        return .reconnect(
            after: retryPolicy.delay(forAttempt: failures, retryAfter: retryAfter), attempt: failures, error: reason)
    }

    /// The backoff of a ``Action/reconnect(after:attempt:error:)`` has passed; `localState` is the cache's state now.
    public mutating func retryDue(localState: String?) -> Action {
        guard phase == .waiting else { return .none }
        return connect(localState: localState)
    }

    /// New credentials are available: a stream stopped by 401 is opened again.
    public mutating func credentialsRenewed(localState: String?) -> Action {
        guard phase == .stopped(.unauthorized) else { return .none }
        failures = 0
        return connect(localState: localState)
    }

    private mutating func connect(localState: String?) -> Action {
        phase = .connecting
        return .connect(lastEventID: localState ?? lastEventID)
    }
}
