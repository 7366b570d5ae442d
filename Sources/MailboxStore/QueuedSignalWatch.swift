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
public final class QueuedSignalWatch: Sendable {
    private let stopped = LockedValue(false)
    private let local: SignalWake
    private let registration: Int

    init(local: SignalWake, listening url: String?, channel: String, wake: @escaping @Sendable () -> Void) {
        self.local = local
        registration = local.add(wake)
        guard let url else { return }
        Thread.start(named: "pg-listen") { [stopped] in
            Self.listen(url: url, channel: channel, stopped: stopped, wake: wake)
        }
    }

    /// Stops watching (the LISTEN thread within about half a second).
    public func cancel() {
        local.remove(registration)
        stopped.withLock { $0 = true }
    }

    deinit { cancel() }

    private static func listen(
        url: String, channel: String, stopped: LockedValue<Bool>, wake: @Sendable () -> Void
    ) {
        var connection: PostgresConnection?
        var lastAsked = DispatchTime.now()
        while !stopped.withLock({ $0 }) {
            do {
                if connection == nil {
                    let fresh = try PostgresConnection(url: url, applicationName: "signalfetch-listen")
                    try fresh.listen(channel)
                    connection = fresh
                    lastAsked = DispatchTime.now()
                    wake()  // anything queued while this process was not listening
                }
                if let channels = try connection?.waitForNotifications(timeout: 0.5), !channels.isEmpty { wake() }
                if DispatchTime.now().uptimeNanoseconds - lastAsked.uptimeNanoseconds > 2_000_000_000 {
                    lastAsked = DispatchTime.now()
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
        return QueuedSignalWatch(local: signalWake, listening: url, channel: PostgresEngine.outboxChannel, wake: wake)
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
}
