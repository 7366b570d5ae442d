import Durations
import Foundation
import Locking
import PostgresKit

/// The one way a dispatcher learns that signals were queued: the store calls `wake` after every commit of this
/// process that queued signals, on every engine, and on PostgreSQL also when another process sharing the database
/// did (a thread LISTENs on the outbox channel, which every such transaction NOTIFYs at commit; after a lost
/// connection it connects again and wakes once, in case a notification was missed meanwhile — the dispatcher's
/// poll covers the rest). Writers need not wake anything themselves. The thread also
/// asks its server every 2 s whether it still takes writes: a read-only one (a demoted primary) would never hear the
/// new primary's notifications, so it connects again, which reaches the primary.
///
/// The same connection LISTENs on the changes channel, which every transaction that changed accounts notifies with
/// the accounts and their modseqs: the process's one LISTEN tells ``MailboxStore/observeChangesOfEveryInstance(_:)``
/// of the other instances' commits, so an IDLE connection or an event stream wakes on them without a look of its own.
public final class QueuedSignalWatch: Sendable {
    private let stopped = LockedValue(false)
    private let local: SignalWake
    private let registration: Int

    init(
        local: SignalWake, listening url: String?, remote: CommitObservers, token: String, clock: any WallClock,
        wake: @escaping @Sendable () -> Void
    ) {
        self.local = local
        registration = local.add(wake)
        guard let url else { return }
        Thread.start(named: "pg-listen") { [stopped] in
            Self.listen(url: url, stopped: stopped, wake: wake) { payload in
                // No payload: listening (again), so whatever was committed meanwhile was not heard.
                let changes =
                    payload.map { Self.changes(in: $0, skipping: token, at: clock.secondsSince1970) }
                    ?? [
                        CommittedChange(
                            accountID: CommittedChange.everyAccount, modseq: 0, at: clock.secondsSince1970)
                    ]
                if !changes.isEmpty { remote.tell(changes) }
            }
        }
    }

    /// The changes a changes-channel payload (`TOKEN ACCOUNT:MODSEQ …`) announces, heard `at` (seconds since 1970),
    /// none when `skipping` sent them.
    static func changes(in payload: String, skipping token: String, at: Double) -> [CommittedChange] {
        let fields = payload.split(separator: " ")
        guard let sender = fields.first, sender != token else { return [] }
        return fields.dropFirst().compactMap { field in
            let parts = field.split(separator: ":")
            guard parts.count == 2, let account = Int64(parts[0]), let modseq = Int64(parts[1]) else { return nil }
            return CommittedChange(accountID: account, modseq: modseq, at: at)
        }
    }

    /// Stops watching (the LISTEN thread within about half a second).
    public func cancel() {
        local.remove(registration)
        stopped.withLock { $0 = true }
    }

    deinit { cancel() }

    private static func listen(
        url: String, stopped: LockedValue<Bool>, wake: @Sendable () -> Void, changed: @Sendable (String?) -> Void
    ) {
        var connection: PostgresConnection?
        var lastAsked = MonotonicTime.nanoseconds()
        while !stopped.withLock({ $0 }) {
            do {
                if connection == nil {
                    let fresh = try PostgresConnection(url: url, applicationName: "signalfetch-listen")
                    try fresh.listen(PostgresEngine.outboxChannel)
                    try fresh.listen(PostgresEngine.changesChannel)
                    connection = fresh
                    lastAsked = MonotonicTime.nanoseconds()
                    wake()  // anything queued while this process was not listening
                    changed(nil)  // and any change committed meanwhile
                }
                let notifications = try connection?.waitForNotifications(timeout: 0.5) ?? []
                if notifications.contains(where: { $0.channel == PostgresEngine.outboxChannel }) { wake() }
                for notification in notifications where notification.channel == PostgresEngine.changesChannel {
                    changed(notification.payload)
                }
                if MonotonicTime.nanoseconds() - lastAsked > 2_000_000_000 {
                    lastAsked = MonotonicTime.nanoseconds()
                    let readOnly = try connection?.query("SHOW transaction_read_only").first?.string(
                        "transaction_read_only")
                    if readOnly == "on" { throw PostgresError(sqlstate: "25006", message: "the server is read-only") }
                }
            } catch {
                connection = nil
                for _ in 0..<10 where !stopped.withLock({ $0 }) { usleep(100_000) }
            }
        }
    }
}

extension MailboxStore {
    /// Calls `wake` whenever a commit queued signals, in this process or (PostgreSQL) any other sharing the store
    /// (see ``QueuedSignalWatch``), until the returned watch is cancelled or released.
    public func watchQueuedSignals(_ wake: @escaping @Sendable () -> Void) -> QueuedSignalWatch {
        var url: String?
        if case .postgres(let postgres) = database { url = postgres }
        return QueuedSignalWatch(
            local: signalWake, listening: url, remote: remoteObservers, token: instanceToken, clock: clock, wake: wake)
    }
}

/// The callbacks told after a commit of this process queued signals.
final class SignalWake: Sendable {
    private let state = LockedValue<(next: Int, callbacks: [Int: @Sendable () -> Void])>((0, [:]))

    /// Adds `callback`; returns its registration.
    func add(_ callback: @escaping @Sendable () -> Void) -> Int {
        state.withLock { state in
            state.next += 1
            state.callbacks[state.next] = callback
            return state.next
        }
    }

    /// Removes a registration.
    func remove(_ registration: Int) { _ = state.withLock { $0.callbacks.removeValue(forKey: registration) } }

    /// Calls every callback.
    func fire() {
        for callback in state.withLock({ Array($0.callbacks.values) }) { callback() }
    }
}

/// Who is told of the changes each commit of this process wrote: the account, its new modseq, the time. Told after
/// the commit, on the writer's thread: an observer only hands the changes on.
final class CommitObservers: Sendable {
    private let observers = LockedValue<[@Sendable ([CommittedChange]) -> Void]>([])

    func add(_ observer: @escaping @Sendable ([CommittedChange]) -> Void) { observers.withLock { $0.append(observer) } }

    func tell(_ changes: [CommittedChange]) {
        for observer in observers.withLock({ $0 }) { observer(changes) }
    }
}

extension MailboxStore {
    /// Tells `observer` the changes every later commit of this process writes (a console shows them as they
    /// happen). Commits of other processes sharing a PostgreSQL store are theirs to tell.
    public func observeCommittedChanges(_ observer: @escaping @Sendable ([CommittedChange]) -> Void) {
        commitObservers.add(observer)
    }

    /// Tells `observer` the changes every later commit writes: this process's at once, and on PostgreSQL those of
    /// every other process sharing the store as their notifications arrive, while the store is watched
    /// (``watchQueuedSignals(_:)``: the process's one LISTEN). For whoever wakes clients of any instance (IDLE,
    /// event streams); a pusher that each instance runs for its own commits uses ``observeCommittedChanges(_:)``.
    public func observeChangesOfEveryInstance(_ observer: @escaping @Sendable ([CommittedChange]) -> Void) {
        commitObservers.add(observer)
        remoteObservers.add(observer)
    }
}
