import Locking
import MailboxStore
import SignalDispatch

/// Where a change came in: the API's `POST /v1/deliveries`, the LMTP listener, an IMAP APPEND or STORE, or a JMAP
/// write.
public enum ArrivalKind: String, Sendable {
    /// `POST /v1/deliveries`, LMTP, IMAP APPEND or STORE, a JMAP write.
    case api, lmtp, imap, jmap
}

/// One change that came in and was committed (a message, or a client's write): its account, the account's modseq
/// right after it, and when the request began and was answered (the store's clock, seconds since 1970). A W3C
/// `traceparent` the caller sent is kept as it came, checked by whoever uses it. Content-free: no address, subject
/// or body.
public struct Arrival: Sendable {
    /// Where it came in.
    public var kind: ArrivalKind
    /// The account.
    public var accountID: Int64
    /// The account's modseq after it.
    public var modseq: Int64
    /// When the request began.
    public var startedAt: Double
    /// When it was answered.
    public var endedAt: Double
    /// The caller's W3C `traceparent`, unchecked.
    public var traceparent: String?

    /// An arrival.
    public init(
        kind: ArrivalKind, accountID: Int64, modseq: Int64, startedAt: Double, endedAt: Double,
        traceparent: String? = nil
    ) {
        self.kind = kind
        self.accountID = accountID
        self.modseq = modseq
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.traceparent = traceparent
    }
}

/// A fetch of an account's changes: from the state it asked from (`nil` for a full sync's first page) to the modseq
/// it was answered with, and when (the store's clock); over the API by a session, or an IMAP client's QRESYNC.
public struct Fetch: Sendable {
    /// The API's `/v1` sync, or IMAP (SELECT with QRESYNC).
    public enum Path: String, Sendable {
        case api, imap
    }

    /// The session that fetched (`nil` over IMAP, which signs in without one).
    public var sessionID: Int64?
    /// How it fetched.
    public var path: Path
    /// The account.
    public var accountID: Int64
    /// The modseq it asked from; `nil` for a full sync.
    public var since: Int64?
    /// The account's modseq after it.
    public var modseq: Int64
    /// When the request began.
    public var startedAt: Double
    /// When it was answered.
    public var at: Double

    /// A fetch.
    public init(
        sessionID: Int64?, path: Path = .api, accountID: Int64, since: Int64?, modseq: Int64, startedAt: Double,
        at: Double
    ) {
        self.sessionID = sessionID
        self.path = path
        self.accountID = accountID
        self.since = since
        self.modseq = modseq
        self.startedAt = startedAt
        self.at = at
    }
}

/// Whoever watches the signal-then-fetch loop happen: the console, the trace exporter. Each is told on the
/// caller's thread (the store's writer, the dispatcher, a request's handler) and must only hand the event on.
public protocol LoopObserver: Sendable {
    /// A message came in and was committed.
    func arrived(_ arrival: Arrival)
    /// This process committed `changes`.
    func committed(_ changes: [CommittedChange])
    /// The dispatcher finished with an outbox row.
    func signalled(_ report: SignalReport)
    /// A session fetched its account's changes.
    func fetched(_ fetch: Fetch)
    /// A session registered (or refreshed) a device.
    func registered(sessionID: Int64)
}

extension LoopObserver {
    /// Ignored unless the observer wants it.
    public func arrived(_ arrival: Arrival) {}
    /// Ignored unless the observer wants it.
    public func registered(sessionID: Int64) {}
}

/// The one content-free feed of the loop: arrivals, this process's commits, signal outcomes and fetches, told to
/// every observer (the console and the trace exporter share it). With no observer, telling it costs a lock.
public final class LoopFeed: Sendable {
    private let observers = LockedValue<[any LoopObserver]>([])

    /// A feed of `store`'s commits (this process's), and of what its callers tell it.
    public init(store: MailboxStore) {
        store.observeCommittedChanges { [observers] changes in
            Self.tell(observers) { $0.committed(changes) }
        }
    }

    private static func tell(_ observers: LockedValue<[any LoopObserver]>, _ event: (any LoopObserver) -> Void) {
        for observer in observers.withLock({ $0 }) { event(observer) }
    }

    /// Tells `observer` every later event.
    public func add(_ observer: any LoopObserver) { observers.withLock { $0.append(observer) } }

    /// Whether anyone is told (a caller may skip reading the clock for nobody).
    public var isObserved: Bool { !observers.withLock { $0.isEmpty } }

    /// Tells every observer of an arrival.
    public func arrived(_ arrival: Arrival) {
        Self.tell(observers) { $0.arrived(arrival) }
    }

    /// Tells every observer of a signal's outcome.
    public func signalled(_ report: SignalReport) {
        Self.tell(observers) { $0.signalled(report) }
    }

    /// Tells every observer of a fetch.
    public func fetched(_ fetch: Fetch) {
        Self.tell(observers) { $0.fetched(fetch) }
    }

    /// Tells every observer of a device registration.
    public func registered(sessionID: Int64) {
        Self.tell(observers) { $0.registered(sessionID: sessionID) }
    }
}
