import Durations
import SQLSupport

/// What the deliveries of one group-committed transaction share. Each recipient is looked up once per batch,
/// and each account's modseq is written and its devices' outbox rows upserted once, when the batch settles
/// (before the next write that does not defer, and before the COMMIT), rather than once per message. Every
/// message still gets its own modseq; the account ends the batch at the newest one, as if each delivery had
/// bumped it alone.
///
/// On SQLite the group-commit writer keeps one ledger for its whole batch; on PostgreSQL every write transaction
/// has its own. Either way a ledger is used by one transaction at a time, never from two threads at once.
final class BatchLedger: @unchecked Sendable {
    /// An account that mail is delivered to, and its inbox.
    struct Recipient {
        let account: Int64
        let inbox: Int64
    }

    private var recipients: [String: Recipient] = [:]
    /// Account → its modseq as the recipient lookup read (and locked) it, until the batch settles: the delivery's
    /// ``nextModseq(_:account:)`` then needs no statement of its own.
    private var current: [Int64: Int64] = [:]
    /// Account → the newest modseq a delivery in this batch used, not yet written to `accounts`.
    private var pending: [Int64: Int64] = [:]
    /// Account → its devices and their outbox rows, read by the recipient lookup where a ledger serves one
    /// transaction of its own (PostgreSQL): settling then needs no read, and its writes ride with the COMMIT.
    private var devices: [Int64: [Row]] = [:]
    /// Whether the transaction queued a signal that can be sent now (the PostgreSQL engine then notifies every
    /// process's dispatcher).
    var signalsQueued = false
    /// The changes the transaction wrote (each account's newest modseq), for whoever watches commits.
    private(set) var changes: [CommittedChange] = []
    private let pacing: SignalPacing
    private let clock: any WallClock

    init(pacing: SignalPacing, clock: any WallClock) {
        self.pacing = pacing
        self.clock = clock
    }

    /// The account named `username` (already lowercased) and its inbox, or `nil` when there is none. The same
    /// statement reads the account's modseq and, where writers run concurrently, locks its row, as
    /// ``nextModseq(_:account:)`` would: one round trip fewer for every delivery on PostgreSQL.
    ///
    /// Where each transaction has a ledger of its own (PostgreSQL), the same statement also reads the account's
    /// devices and their outbox rows, which settling would otherwise read in a round trip of its own: the account's
    /// row stays locked from here to the COMMIT, and a delivery changes no device.
    func recipient(_ db: any SQLConnection, username: String) throws -> Recipient? {
        if let known = recipients[username] { return known }
        let withDevices = db.dialect.writesAndReadsInOneStatement
        let rows = try db.query(
            withDevices
                ? """
                SELECT a.id AS account_id, b.id AS inbox_id, a.modseq, \(MailboxStore.outboxDeviceColumns(db.dialect))
                FROM accounts a JOIN mailboxes b ON b.account_id = a.id AND b.role = 'inbox'
                LEFT JOIN devices d ON d.account_id = a.id LEFT JOIN signal_outbox o ON o.device_id = d.id
                WHERE a.username = ?\(db.dialect.lockRows(of: "a"))
                """
                : """
                SELECT a.id AS account_id, b.id AS inbox_id, a.modseq
                FROM accounts a JOIN mailboxes b ON b.account_id = a.id AND b.role = 'inbox'
                WHERE a.username = ?\(db.dialect.lockRows(of: "a"))
                """, arguments: [username])
        guard let row = rows.first, let account = row["account_id"].int64, let inbox = row["inbox_id"].int64,
            let modseq = row["modseq"].int64
        else { return nil }
        let recipient = Recipient(account: account, inbox: inbox)
        recipients[username] = recipient
        current[account] = modseq
        if withDevices { devices[account] = rows }
        return recipient
    }

    /// The modseq the account's next change takes. Not taken until ``use(_:account:)`` records it, so a
    /// delivery whose insert fails leaves no gap. Where writers run concurrently the account row stays locked
    /// until the transaction ends, so an account's changes commit in modseq order: a client that read state S
    /// can never miss a change at or below S that commits later.
    func nextModseq(_ db: any SQLConnection, account: Int64) throws -> Int64 {
        if let last = pending[account] ?? current[account] { return last + 1 }
        guard
            let current = try db.scalar("SELECT modseq FROM accounts WHERE id = ?\(db.dialect.lockRows)", account).int64
        else {
            throw MailboxStoreError.notFound
        }
        return current + 1
    }

    /// Records that a change of the account was stored at `modseq`.
    func use(_ modseq: Int64, account: Int64) {
        pending[account] = modseq
    }

    /// Writes each pending account's newest modseq and upserts its devices' outbox rows (on PostgreSQL the modseq
    /// and the devices' read are one statement).
    func settle(_ db: any SQLConnection) throws {
        // The next write may change a modseq or a device outside this ledger (a flag, a deletion): read again after.
        current.removeAll(keepingCapacity: true)
        let known = devices
        devices.removeAll(keepingCapacity: true)
        guard !pending.isEmpty else { return }
        let time = clock.secondsSince1970
        for (account, modseq) in pending.sorted(by: { $0.key < $1.key }) {
            changes.append(CommittedChange(accountID: account, modseq: modseq, at: time))
            if try MailboxStore.enqueueSignals(
                db, account: account, modseq: modseq, time: time, pacing: pacing, settingModseq: true,
                devices: known[account])
            {
                signalsQueued = true
            }
        }
        pending.removeAll(keepingCapacity: true)
    }

    /// Records a change written outside the pending bookkeeping (a flag, a move, a deletion).
    func noteChange(account: Int64, modseq: Int64, at time: Double) {
        changes.append(CommittedChange(accountID: account, modseq: modseq, at: time))
    }

    /// Forgets the batch: it was committed (after settling) or rolled back.
    func discard() {
        signalsQueued = false
        changes.removeAll(keepingCapacity: true)
        pending.removeAll(keepingCapacity: true)
        current.removeAll(keepingCapacity: true)
        devices.removeAll(keepingCapacity: true)
        recipients.removeAll(keepingCapacity: true)
    }
}
