import Durations
import Foundation
import Locking
import OpenSSLCrypto
import SQLSupport
import SQLiteKit

/// The mailbox service's data: accounts, sessions, mailboxes, messages with a change log for delta sync,
/// devices and the signal outbox, in one SQLite file (the embedded default) or one PostgreSQL database shared by
/// several processes.
///
/// Reads run on reader connections and see one consistent snapshot each. Writes are group-committed:
/// concurrent writers share transactions (see `WriteBatcher`), and every write that changes what a client
/// sees bumps the account's modseq and upserts one outbox row per registered device in the same transaction.
public final class MailboxStore: Sendable {
    /// How the store behaves.
    public struct Configuration: Sendable {
        /// SQLite's `synchronous` setting: `.full` makes every acknowledged write survive power loss.
        public var synchronous: SynchronousMode = .full
        /// How long tombstones are kept; a state older than the oldest discarded one cannot be synced from.
        public var tombstoneRetention: TimeInterval = 30 * 86_400
        /// How often one device may be signalled (a token bucket per device; see ``SignalPacing``).
        public var pacing = SignalPacing.standard
        /// scrypt cost for new password hashes.
        public var passwordParameters: ScryptParameters = .standard
        /// How long a claimed outbox row is leased to the dispatcher before it can be claimed again.
        public var claimLease: TimeInterval = 30
        /// The largest batch of writes committed together (SQLite).
        public var maximumBatch = 512
        /// How many connections a PostgreSQL store keeps, each on a thread of its own.
        public var postgresConnections = 16
        /// This process's name in the leases it takes on outbox rows (see ``claimDueSignals(limit:)``).
        public var instanceID = "\(ProcessInfo.processInfo.hostName)-\(getpid())"
        /// The most devices one account may register; one more is refused (``MailboxStoreError/tooManyDevices``),
        /// so one account cannot make every change fan out to thousands of pushes under the server's credentials.
        public var maximumDevicesPerAccount = 100
        /// A session unused for this long is over (its token is refused). Its last use is written at most every
        /// tenth of this (at most hourly), so a session in use never ends this way, and reads stay reads.
        public var sessionIdleTimeout: TimeInterval = 30 * 86_400
        /// A session this old is over, however much it is used: the user signs in again.
        public var sessionLifetime: TimeInterval = 90 * 86_400
        /// The most live sessions one account keeps; a sign-in beyond it ends the least recently used.
        public var maximumSessionsPerAccount = 20

        /// The defaults.
        public init() {}
    }

    /// How the store's transactions run: SQLite's group-committing writer, or PostgreSQL's pooled connections.
    let engine: any StoreEngine
    let configuration: Configuration
    /// The clock ``currentTime`` reads.
    let clock: any WallClock
    /// This process's name in the outbox leases it takes (``Configuration/instanceID``).
    public var instanceID: String { configuration.instanceID }
    /// The store's clock now, seconds since 1970: what every rule about time (due rows, budgets, leases) reads.
    public var currentTime: Double { clock.secondsSince1970 }
    /// The random epoch of this store, the first part of every state string.
    public let epoch: String
    /// A fixed scrypt hash verified when a username does not exist, so both paths cost the same.
    let decoyPasswordHash: String
    /// The threads password hashing runs on: scrypt takes tens of milliseconds of CPU, which must not hold the
    /// cooperative pool.
    let passwordHashing = BlockingExecutor(threads: 2, name: "mailbox-password")
    /// Where the data lives.
    public let database: StoreDatabase
    /// Who is told when a commit of this process queued signals (see ``watchQueuedSignals(_:)``).
    let signalWake: SignalWake
    /// Who is told of the changes each commit of this process wrote (see ``observeCommittedChanges(_:)``).
    let commitObservers: CommitObservers
    /// Who is told of the changes other processes sharing the store committed (see
    /// ``observeChangesOfEveryInstance(_:)``).
    let remoteObservers = CommitObservers()
    /// This process's random token in the changes it announces on PostgreSQL (its own listener passes them over).
    let instanceToken = Hex.encode(SecureRandom.bytes(8))

    /// Opens (creating and migrating as needed) the SQLite store at `path`, reading the time from `clock`.
    public convenience init(
        path: String, configuration: Configuration = Configuration(), clock: any WallClock = SystemClock()
    ) throws {
        try self.init(database: .sqlite(path: path), configuration: configuration, clock: clock)
    }

    /// Opens (creating and migrating as needed) the store in `database`. Several processes may open the same
    /// PostgreSQL database at once: their migrations take turns, and they share one epoch. The store reads the time
    /// from `clock`.
    public init(
        database: StoreDatabase, configuration: Configuration = Configuration(), clock: any WallClock = SystemClock()
    ) throws {
        let makeLedger: @Sendable () -> BatchLedger = { [pacing = configuration.pacing] in
            BatchLedger(pacing: pacing, clock: clock)
        }
        let wake = SignalWake()
        signalWake = wake
        let observers = CommitObservers()
        commitObservers = observers
        let committed: @Sendable (Bool, [CommittedChange]) -> Void = { signalsQueued, changes in
            if signalsQueued { wake.fire() }
            if !changes.isEmpty { observers.tell(changes) }
        }
        switch database {
        case .sqlite(let path):
            engine = try Self.storageErrors {
                try SQLiteEngine(
                    path: path, synchronous: configuration.synchronous, maximumBatch: configuration.maximumBatch,
                    ledger: makeLedger(), committed: committed)
            }
        case .postgres(let url):
            engine = PostgresEngine(
                url: url, connections: configuration.postgresConnections, instanceToken: instanceToken,
                makeLedger: makeLedger, committed: committed)
        }
        self.database = database
        self.configuration = configuration
        self.clock = clock
        epoch = try Self.storageErrors { [engine] in
            try engine.migrate(Self.migrations)
            return try engine.setUp { try Self.establishEpoch($0) }
        }
        decoyPasswordHash = try PasswordHash.hash(SecureRandom.hex(16), parameters: configuration.passwordParameters)
    }

    /// The store's epoch, created by the first process to open the database. `ON CONFLICT DO NOTHING` then a
    /// read: two processes opening a new database at once both end with the one that won.
    static func establishEpoch(_ db: any SQLConnection) throws -> String {
        try db.run(
            "INSERT INTO store_meta (key, value) VALUES ('epoch', ?) ON CONFLICT (key) DO NOTHING", SecureRandom.hex(8))
        guard let epoch = try db.scalar("SELECT value FROM store_meta WHERE key = 'epoch'").string else {
            throw MailboxStoreError.notFound
        }
        return epoch
    }

    /// `error` as the store reports it: a database error becomes `.storage`; anything else is left as it is.
    static func storageError(_ error: any Error) -> any Error {
        StorageFailure.from(error).map { MailboxStoreError.storage($0) } ?? error
    }

    /// Runs `body`, turning a database error into `.storage`.
    static func storageErrors<T>(_ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch { throw storageError(error) }
    }

    /// The same, for set-up work that does not suspend.
    static func storageErrors<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch { throw storageError(error) }
    }

    /// Runs `body` in a write transaction (group-committed on SQLite), mapping database failures to `.storage`.
    @discardableResult
    func write<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection, BatchLedger) throws -> T) async throws -> T
    {
        try await write(defers: false, body)
    }

    /// ``write(_:)`` for a body that may leave account bookkeeping in the transaction's ledger.
    func write<T: Sendable>(
        defers: Bool, _ body: @escaping @Sendable (any SQLConnection, BatchLedger) throws -> T
    ) async throws -> T {
        try await Self.storageErrors { try await engine.write(defers: defers, body) }
    }

    /// Runs `body` in a read transaction, mapping database failures to `.storage`.
    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await Self.storageErrors { try await engine.read(body) }
    }

    /// Where a task that reads the store several times (a JMAP request) best runs: on SQLite, the readers' threads,
    /// where each read is a call instead of two thread hops; `nil` on PostgreSQL.
    public var readExecutor: (any TaskExecutor)? { engine.readExecutor }

    /// Transactions committed by the group-commit writer so far.
    public var committedWriteBatches: Int { engine.statistics.batches }

    /// The group-commit writer's totals so far: transactions, the writes they held, and the time spent in COMMIT.
    public var writerStatistics: WriterStatistics { engine.statistics }

    /// The engine's consistency check (`"ok"` when sound): `PRAGMA integrity_check` on SQLite; on PostgreSQL,
    /// that no row holds a modseq its account has not reached.
    public func integrityCheck() async throws -> String {
        try await Self.storageErrors { try await engine.engineCheck() }
    }

    func state(_ modseq: Int64) -> SyncState { SyncState(epoch: epoch, modseq: modseq) }

    // MARK: - Shared write steps

    /// Bumps the account's modseq by one and returns the new value.
    ///
    /// On SQLite an UPDATE and a SELECT rather than `UPDATE … RETURNING`: SQLite gathers RETURNING rows in a
    /// temporary table, which made the one statement ten times the cost of the two (25 µs against 2.5 µs) on every
    /// write. On PostgreSQL, where each statement is a round trip, the one statement.
    static func bumpModseq(_ db: any SQLConnection, account: Int64) throws -> Int64 {
        if db.dialect.writesAndReadsInOneStatement {
            guard
                let modseq = try db.scalar(
                    "UPDATE accounts SET modseq = modseq + 1 WHERE id = ? RETURNING modseq", account
                ).int64
            else { throw MailboxStoreError.notFound }
            return modseq
        }
        guard try db.run("UPDATE accounts SET modseq = modseq + 1 WHERE id = ?", account) == 1,
            let modseq = try db.scalar("SELECT modseq FROM accounts WHERE id = ?", account).int64
        else { throw MailboxStoreError.notFound }
        return modseq
    }

    /// Upserts one outbox row per registered device of the account, holding `modseq`.
    ///
    /// A device with no pending row is due at once while its pacing bucket holds a token, otherwise when the next
    /// token returns (``SignalPacing``). A pending row keeps its due time and takes the newer modseq: a burst of
    /// changes leaves one row per device.
    func enqueueSignals(_ db: any SQLConnection, _ ledger: BatchLedger, account: Int64, modseq: Int64) throws {
        let time = clock.secondsSince1970
        ledger.noteChange(account: account, modseq: modseq, at: time)
        if try Self.enqueueSignals(db, account: account, modseq: modseq, time: time, pacing: configuration.pacing) {
            ledger.signalsQueued = true
        }
    }

    /// What ``enqueueSignals(db:account:modseq:time:pacing:settingModseq:devices:)`` reads of each device (`d`) and
    /// its outbox row (`o`).
    static func outboxDeviceColumns(_ dialect: SQLDialect) -> String {
        """
        d.id, d.pace_tokens, d.pace_at, \(dialect.greatest("o.due_at", "o.next_attempt_at", "o.leased_until")) AS claimable_at
        """
    }

    /// ``enqueueSignals(_:_:account:modseq:)`` at `time`. The pacing rule is Swift (`SignalPacing`), not SQL, so
    /// every engine applies the same one. Returns whether dispatchers need waking: a row that can be claimed now,
    /// or a new row, whose due time (now, or when a pacing token returns) no dispatcher's timer knows yet. A row
    /// already pending keeps its due time, which the dispatcher that set it, or read it, waits for.
    ///
    /// With `settingModseq`, the account's modseq is set to `modseq` first (a batch of deliveries settling): where
    /// the engine writes and reads in one statement, the UPDATE is a `WITH` of the devices' read, one round trip.
    /// With `devices` (read by the recipient lookup, ``deviceColumns``, the account's row locked since), there is
    /// no read: the UPDATE and the upserts are deferred to the COMMIT's round trip.
    @discardableResult
    static func enqueueSignals(
        _ db: any SQLConnection, account: Int64, modseq: Int64, time: Double, pacing: SignalPacing,
        settingModseq: Bool = false, devices known: [Row]? = nil
    ) throws -> Bool {
        let columns = outboxDeviceColumns(db.dialect)
        let devices: [Row]
        if let known {
            if settingModseq { try db.runDeferred("UPDATE accounts SET modseq = ? WHERE id = ?", modseq, account) }
            devices = known
        } else if settingModseq && db.dialect.writesAndReadsInOneStatement {
            devices = try db.query(
                """
                WITH bumped AS (UPDATE accounts SET modseq = ? WHERE id = ? RETURNING id)
                SELECT \(columns) FROM bumped JOIN devices d ON d.account_id = bumped.id
                LEFT JOIN signal_outbox o ON o.device_id = d.id
                """, modseq, account)
        } else {
            if settingModseq { try db.run("UPDATE accounts SET modseq = ? WHERE id = ?", modseq, account) }
            devices = try db.query(
                """
                SELECT \(columns) FROM devices d LEFT JOIN signal_outbox o ON o.device_id = d.id WHERE d.account_id = ?
                """, account)
        }
        var wakes = false
        for device in devices {
            let tokens = pacing.tokens(
                stored: device["pace_tokens"].double, at: device["pace_at"].double ?? 0, now: time)
            let due = pacing.dueTime(tokens: tokens, now: time)
            // A pending row keeps its due time; a new one is due as pacing allows.
            guard let deviceID = device["id"].int64 else { continue }  // the lookup's row for an account with none
            if device["claimable_at"].double.map({ $0 <= time }) ?? true { wakes = true }
            try queueSignal(db, deviceID: deviceID, modseq: modseq, dueAt: due)
        }
        return wakes
    }
}

extension MailboxStore {
    /// The names of the migrations the database holds, in the order they ran.
    public func appliedMigrations() async throws -> [String] {
        try await Self.storageErrors { try await engine.appliedMigrations() }
    }
}
