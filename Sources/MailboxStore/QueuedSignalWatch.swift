import Foundation
import Locking
import PostgresKit

/// Wakes this process when any process sharing the store queued signals, so the dispatcher that will send them
/// does not wait for its next poll. On PostgreSQL a thread LISTENs on the outbox channel, which every transaction
/// that queued signals NOTIFYs at commit; after a lost connection it connects again and wakes once, in case a
/// notification was missed meanwhile (the dispatcher's poll covers the rest). On SQLite every writer is in this
/// process, which wakes its own dispatcher, so there is nothing to watch.
public final class QueuedSignalWatch: Sendable {
    private let stopped = LockedValue(false)

    init() {}

    init(url: String, channel: String, wake: @escaping @Sendable () -> Void) {
        let thread = Thread { [stopped] in Self.listen(url: url, channel: channel, stopped: stopped, wake: wake) }
        thread.name = "mailbox-pg-listen"
        thread.start()
    }

    /// Stops watching (within about half a second).
    public func cancel() { stopped.withLock { $0 = true } }

    deinit { cancel() }

    private static func listen(
        url: String, channel: String, stopped: LockedValue<Bool>, wake: @Sendable () -> Void
    ) {
        var connection: PostgresConnection?
        while !stopped.withLock({ $0 }) {
            do throws(PostgresError) {
                if connection == nil {
                    let fresh = try PostgresConnection(url: url, applicationName: "signalfetch-listen")
                    try fresh.listen(channel)
                    connection = fresh
                    wake()  // anything queued while this process was not listening
                }
                if let channels = try connection?.waitForNotifications(timeout: 0.5), !channels.isEmpty { wake() }
            } catch {
                connection = nil
                for _ in 0..<10 where !stopped.withLock({ $0 }) { usleep(100_000) }
            }
        }
    }
}

extension MailboxStore {
    /// Calls `wake` whenever another process sharing this store queues signals (see ``QueuedSignalWatch``), until
    /// the returned watch is cancelled or released.
    public func watchQueuedSignals(_ wake: @escaping @Sendable () -> Void) -> QueuedSignalWatch {
        switch database {
        case .sqlite: return QueuedSignalWatch()
        case .postgres(let url): return QueuedSignalWatch(url: url, channel: PostgresEngine.outboxChannel, wake: wake)
        }
    }
}
