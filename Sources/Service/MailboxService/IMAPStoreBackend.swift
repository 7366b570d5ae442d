import Foundation
import IMAP
import JMAP
import Locking
import LoopEvents
import MailboxHTTPAPI
import MailboxStore

/// The IMAP server's view of the store: the same accounts, passwords and sign-in throttle as `/v1`, the same
/// messages, mailboxes and flags. Each call runs in a task and answers through its completion; commits of any
/// instance reach the IMAP connections watching their account.
final class IMAPStoreBackend: IMAPBackend {
    private let store: MailboxStore
    /// Told of each message a client files (the traces' arrivals).
    private let feed: LoopFeed?
    private let throttle: LoginThrottle
    /// The connections watching each account, and who to tell (set once the server exists).
    private let watchers = LockedValue<(byAccount: [Int64: Set<UInt64>], accounts: [UInt64: Int64])>(([:], [:]))
    private let sink = LockedValue<Sink?>(nil)
    /// Delta reads, one per account, mailbox and starting point while it runs: the connections a commit wakes
    /// together ask the same question and share its answer (a fan-out reads once, not once per connection). Only a
    /// read started after the account's latest commit is shared, so no connection takes an answer older than the
    /// commit that woke it. A finished read's answer is kept until the account's next commit (`done`): the
    /// connections woken after it finished (a loop thread reaches a thousand of them over tens of milliseconds) take
    /// it at once, with no read, no task and no trip back through the loop's inbox.
    private let deltaReads = LockedValue(DeltaReads())

    struct DeltaReads {
        /// Commits seen per account.
        var commits: [Int64: UInt64] = [:]
        /// Reads in flight.
        var running: [DeltaKey: DeltaRead] = [:]
        /// Finished reads' answers with the commit count they were read after, until the account's next commit.
        var done: [DeltaKey: (generation: UInt64, delta: IMAPMailboxDelta?)] = [:]

        /// A commit to `account`: reads before it are neither shared nor kept past it.
        mutating func committed(_ account: Int64) {
            commits[account, default: 0] += 1
            if !done.isEmpty { done = done.filter { $0.key.account != account } }
        }
    }

    /// Who is told: the closure inside a struct. Kept directly as a `LockedValue`'s value, a closure came out of
    /// every `withLock` wrapped in two more reabstraction thunks (its `inout` crosses the generic signature both
    /// ways), so each commit made the next call deeper: after 10,000 commits a notification ran through 20,000
    /// frames (about half of the process's CPU in a run of QRESYNC selects), on its way to a stack overflow.
    struct Sink: Sendable {
        let notify: @Sendable (Set<UInt64>) -> Void
    }

    struct DeltaKey: Hashable {
        var account: Int64
        var mailbox: String
        var since: Int64
    }

    /// A delta read in flight: the commit count it started after, and who waits for it.
    final class DeltaRead: @unchecked Sendable {  // `waiters` is touched under `deltaReads`'s lock only
        let generation: UInt64
        var waiters: [@Sendable (Result<IMAPMailboxDelta?, IMAPBackendError>) -> Void]

        init(generation: UInt64, waiter: @escaping @Sendable (Result<IMAPMailboxDelta?, IMAPBackendError>) -> Void) {
            self.generation = generation
            waiters = [waiter]
        }
    }

    /// The mailboxes selected lately, kept up to date by deltas: a SELECT of a mailbox held here reads what changed
    /// since (work in proportion to the changes), not its whole listing.
    private let snapshots: LockedValue<SnapshotCache>
    /// How many SELECTs read their mailbox's whole listing (the others read a delta).
    let wholeReads = LockedValue(0)
    /// How many deltas were read from the store (the others were shared or kept).
    let deltaStoreReads = LockedValue(0)

    /// Snapshots by account and mailbox, at most `budget` messages in all; the least recently used goes first.
    struct SnapshotCache {
        struct Key: Hashable {
            var account: Int64
            var mailbox: MailboxID
        }

        let budget: Int
        private var entries: [Key: (snapshot: IMAPMailboxSnapshot, used: UInt64)] = [:]
        private var messages = 0
        private var clock: UInt64 = 0

        init(budget: Int) { self.budget = budget }

        mutating func get(_ key: Key) -> IMAPMailboxSnapshot? {
            guard let entry = entries[key] else { return nil }
            clock += 1
            entries[key]?.used = clock
            return entry.snapshot
        }

        /// Snapshots taken out by ``take(_:)`` and not yet put back, with the lookups waiting for them.
        var applying: [Key: [@Sendable () -> Void]] = [:]

        /// Removes and returns the snapshot held for `key`, so its holder has the only reference to its arrays; the
        /// key is ``applying`` until the holder puts it back.
        mutating func take(_ key: Key) -> IMAPMailboxSnapshot? {
            guard let entry = entries.removeValue(forKey: key) else { return nil }
            messages -= entry.snapshot.messages.count
            applying[key] = []
            return entry.snapshot
        }

        /// Keeps `snapshot` unless what is held is newer (a read that finished after it).
        mutating func put(_ key: Key, _ snapshot: IMAPMailboxSnapshot) {
            guard snapshot.messages.count <= budget else { return }
            if let held = entries[key] {
                guard held.snapshot.highestModseq <= snapshot.highestModseq else { return }
                messages -= held.snapshot.messages.count
            }
            clock += 1
            entries[key] = (snapshot, clock)
            messages += snapshot.messages.count
            while messages > budget, let oldest = entries.min(by: { $0.value.used < $1.value.used }) {
                messages -= oldest.value.snapshot.messages.count
                entries[oldest.key] = nil
            }
        }
    }

    init(store: MailboxStore, signIn: SignInLimits, snapshotBudget: Int = 500_000, feed: LoopFeed? = nil) {
        self.store = store
        self.feed = feed
        snapshots = LockedValue(SnapshotCache(budget: snapshotBudget))
        throttle = LoginThrottle(store: store, limits: signIn)
        // Commits of every instance: this process's at once, the others' through the process's one LISTEN.
        store.observeChangesOfEveryInstance { [watchers, sink, deltaReads] changes in
            // Counted before anyone is woken: a read that started before this commit is not shared past it.
            deltaReads.withLock { state in
                if changes.contains(where: { $0.accountID == CommittedChange.everyAccount }) {
                    for account in state.commits.keys { state.commits[account, default: 0] += 1 }
                    state.running = [:]
                    state.done = [:]
                }
                for change in changes where change.accountID != CommittedChange.everyAccount {
                    state.committed(change.accountID)
                }
            }
            let connections = watchers.withLock { state in
                changes.contains { $0.accountID == CommittedChange.everyAccount }
                    ? Set(state.accounts.keys) : Set(changes.flatMap { state.byAccount[$0.accountID] ?? [] })
            }
            guard !connections.isEmpty, let sink = sink.withLock({ $0 }) else { return }
            sink.notify(connections)
        }
    }

    /// Where account changes are told (the IMAP server's ``IMAPServer/notify(_:)``).
    func tell(_ notify: @escaping @Sendable (Set<UInt64>) -> Void) { sink.withLock { $0 = Sink(notify: notify) } }

    /// A mailbox as IMAP names it: a role's by its fixed name, with its special use; one of the user's by the name it
    /// was given.
    struct NamedMailbox: Sendable, Hashable {
        var id: MailboxID
        var name: String
        var specialUse: String?
    }

    /// The role mailboxes' IMAP names and special-use attributes.
    static let roleMailboxes = [
        NamedMailbox(id: .inbox, name: "INBOX"),
        NamedMailbox(id: .archive, name: "Archive", specialUse: "\\Archive"),
        NamedMailbox(id: .trash, name: "Trash", specialUse: "\\Trash"),
    ]

    /// The role mailbox IMAP names `name` (`INBOX` in any case), if it is one.
    static func roleMailbox(named name: String) -> NamedMailbox? {
        let name = name.uppercased() == "INBOX" ? "INBOX" : name
        return roleMailboxes.first { $0.name == name }
    }

    /// The mailbox IMAP names `name`: a role's at once, one of the user's by one small read.
    private static func mailbox(named name: String, account: Int64, store: MailboxStore) async throws -> NamedMailbox {
        if let known = roleMailbox(named: name) { return known }
        guard let id = try await store.mailboxID(accountID: account, named: name) else {
            throw IMAPBackendError.noMailbox
        }
        return NamedMailbox(id: id, name: name)
    }

    /// The store's modseq as IMAP shows it: one more, because a mod-sequence is at least 1 (RFC 7162) and an
    /// account that never changed is at 0. Every MODSEQ and HIGHESTMODSEQ goes through here, and clients only ever
    /// give back values they were given, so the shift is the same both ways.
    static func imapModseq(_ modseq: Int64) -> Int64 { modseq + 1 }

    /// The account's modseq a MODSEQ or HIGHESTMODSEQ of ``imapModseq(_:)`` stands for.
    static func storeModseq(_ imapModseq: Int64) -> Int64 { imapModseq - 1 }

    /// Tells the loop's feed of a client's write (APPEND, STORE) that brought the account to `imapModseq`.
    private static func arrived(
        _ feed: LoopFeed?, store: MailboxStore, account: Int64, imapModseq: Int64, startedAt: Double
    ) {
        guard let feed, feed.isObserved else { return }
        feed.arrived(
            Arrival(
                kind: .imap, accountID: account, modseq: storeModseq(imapModseq), startedAt: startedAt,
                endedAt: store.currentTime))
    }

    /// A UIDVALIDITY that stays the same for the mailbox's life and differs between stores: the store's epoch and
    /// the mailbox's row id, hashed (FNV-1a) to 31 bits, never 0.
    static func uidValidity(epoch: String, mailboxID: Int64) -> UInt32 {
        var hash: UInt32 = 2_166_136_261
        for byte in "\(epoch)/\(mailboxID)".utf8 {
            hash ^= UInt32(byte)
            hash = hash &* 16_777_619
        }
        return max(1, hash & 0x7FFF_FFFF)
    }

    private func run<T: Sendable>(
        _ completion: @escaping @Sendable (Result<T, IMAPBackendError>) -> Void,
        _ body: @escaping @Sendable () async throws -> T
    ) {
        Task {
            do {
                completion(.success(try await body()))
            } catch MailboxStoreError.notFound {
                completion(.failure(.noMessage))
            } catch MailboxStoreError.mailboxExists {
                completion(.failure(.mailboxExists))
            } catch MailboxStoreError.roleMailbox {
                completion(.failure(.roleMailbox))
            } catch MailboxStoreError.invalidArgument(let what) {
                completion(.failure(.invalid(what)))
            } catch let error as IMAPBackendError {
                completion(.failure(error))
            } catch {
                completion(.failure(.unavailable))
            }
        }
    }

    func login(
        username: String, password: String, address: String, completion: @escaping @Sendable (IMAPLoginResult) -> Void
    ) {
        let (store, throttle) = (store, throttle)
        Task {
            do {
                switch try await throttle.decide(username: username, address: address) {
                case .refuse: return completion(.throttled)
                case .proceed(let delay) where delay > 0: try await Task.sleep(for: .seconds(delay))
                case .proceed: break
                }
                // `alice@example.com` signs in as alice, as LMTP takes mail for it.
                var accountID = try await store.authenticate(username: username, password: password)
                if accountID == nil, let at = username.lastIndex(of: "@"), at != username.startIndex {
                    accountID = try await store.authenticate(
                        username: String(username[..<at]), password: password)
                }
                guard let accountID else {
                    try await throttle.recordFailure(username: username, address: address)
                    return completion(.rejected)
                }
                try await throttle.recordSuccess(username: username, address: address)
                completion(.accepted(account: accountID))
            } catch {
                completion(.unavailable)
            }
        }
    }

    func mailboxes(
        account: Int64, completion: @escaping @Sendable (Result<[IMAPMailboxInfo], IMAPBackendError>) -> Void
    ) {
        let store = store
        run(completion) {
            let summaries = try await store.mailboxes(accountID: account)
            let roles = Self.roleMailboxes.compactMap { mailbox -> IMAPMailboxInfo? in
                guard let summary = summaries.first(where: { $0.id == mailbox.id }) else { return nil }
                return IMAPMailboxInfo(
                    name: mailbox.name, specialUse: mailbox.specialUse, messages: summary.total,
                    unseen: summary.unread)
            }
            return roles
                + summaries.filter { $0.role == nil }.sorted { $0.name < $1.name }.map {
                    IMAPMailboxInfo(name: $0.name, specialUse: nil, messages: $0.total, unseen: $0.unread)
                }
        }
    }

    func snapshot(
        account: Int64, mailbox: String,
        completion: @escaping @Sendable (Result<IMAPMailboxSnapshot, IMAPBackendError>) -> Void
    ) {
        guard let named = Self.roleMailbox(named: mailbox) else {
            // One of the user's: its id first, by one small read.
            let store = store
            return run(completion) {
                let named = try await Self.mailbox(named: mailbox, account: account, store: store)
                return try await withCheckedThrowingContinuation { continuation in
                    self.snapshot(account: account, mailbox: named) { continuation.resume(with: $0) }
                }
            }
        }
        snapshot(account: account, mailbox: named, completion: completion)
    }

    /// ``snapshot(account:mailbox:completion:)`` of a mailbox whose id is known.
    private func snapshot(
        account: Int64, mailbox named: NamedMailbox,
        completion: @escaping @Sendable (Result<IMAPMailboxSnapshot, IMAPBackendError>) -> Void
    ) {
        let mailbox = named.name
        let key = SnapshotCache.Key(account: account, mailbox: named.id)
        // Taken out of the cache while the delta is applied, so the apply changes the one copy in place: left in the
        // cache, it would copy the whole listing first (copy on write), work in proportion to the mailbox for a
        // change of a few messages. A SELECT of the same mailbox meanwhile waits for it to be back (two devices
        // woken by one signal), then looks again, rather than read the mailbox whole.
        enum Lookup {
            case held(HeldSnapshot)
            case waiting
            case missing
        }
        let retry: @Sendable () -> Void = { self.snapshot(account: account, mailbox: named, completion: completion) }
        let lookup = snapshots.withLock { cache -> Lookup in
            if let snapshot = cache.take(key) { return .held(HeldSnapshot(snapshot)) }
            guard cache.applying[key] != nil else { return .missing }
            cache.applying[key]?.append(retry)
            return .waiting
        }
        guard case .held(let held) = lookup else {
            if case .missing = lookup { readSnapshot(account: account, mailbox: named, completion: completion) }
            return
        }
        delta(account: account, mailbox: mailbox, since: held.snapshot.highestModseq) { [snapshots] result in
            switch result {
            case .success(let delta?):
                held.snapshot.apply(delta)
                let applied = held.snapshot
                Self.putBack(applied, key, in: snapshots)
                completion(.success(applied))
            case .success(nil):
                Self.putBack(nil, key, in: snapshots)
                self.readSnapshot(account: account, mailbox: named, completion: completion)
            case .failure(let error):
                Self.putBack(held.snapshot, key, in: snapshots)
                completion(.failure(error))
            }
        }
    }

    /// Puts a taken snapshot back (`nil`: it is out of date, a whole read replaces it) and lets the SELECTs that
    /// waited for it look again.
    private static func putBack(
        _ snapshot: IMAPMailboxSnapshot?, _ key: SnapshotCache.Key, in snapshots: LockedValue<SnapshotCache>
    ) {
        let waiting = snapshots.withLock { cache in
            if let snapshot { cache.put(key, snapshot) }
            return cache.applying.removeValue(forKey: key) ?? []
        }
        for retry in waiting { retry() }
    }

    /// A snapshot taken out of the cache, held by reference so the delta's completion changes it in place.
    final class HeldSnapshot: @unchecked Sendable {  // used by one completion at a time, which runs once
        var snapshot: IMAPMailboxSnapshot
        init(_ snapshot: IMAPMailboxSnapshot) { self.snapshot = snapshot }
    }

    /// The whole listing of a mailbox, read from the store and kept.
    private func readSnapshot(
        account: Int64, mailbox named: NamedMailbox,
        completion: @escaping @Sendable (Result<IMAPMailboxSnapshot, IMAPBackendError>) -> Void
    ) {
        let (store, snapshots) = (store, snapshots)
        wholeReads.withLock { $0 += 1 }
        run(completion) {
            let listing: MailboxListing
            do {
                listing = try await store.mailboxListing(accountID: account, mailbox: named.id)
            } catch MailboxStoreError.notFound {
                throw IMAPBackendError.noMailbox
            }
            let messages = listing.entries.map {
                IMAPMessageState(
                    uid: UInt32(truncatingIfNeeded: $0.uid), id: $0.id, seen: $0.seen, flagged: $0.flagged,
                    modseq: Self.imapModseq($0.modseq), keywords: $0.keywords)
            }
            let snapshot = IMAPMailboxSnapshot(
                info: IMAPMailboxInfo(
                    name: named.name, specialUse: named.specialUse, messages: messages.count,
                    unseen: messages.filter { !$0.seen }.count),
                uidValidity: Self.uidValidity(epoch: store.epoch, mailboxID: listing.mailboxID),
                uidNext: UInt32(truncatingIfNeeded: max(listing.uidNext, (listing.entries.last?.uid ?? 0) + 1)),
                highestModseq: Self.imapModseq(listing.modseq),
                messages: messages)
            snapshots.withLock { $0.put(SnapshotCache.Key(account: account, mailbox: named.id), snapshot) }
            return snapshot
        }
    }

    func delta(
        account: Int64, mailbox: String, since highestModseq: Int64,
        completion: @escaping @Sendable (Result<IMAPMailboxDelta?, IMAPBackendError>) -> Void
    ) {
        let key = DeltaKey(account: account, mailbox: mailbox, since: highestModseq)
        enum Next {
            case answered(IMAPMailboxDelta?)
            case waiting
            case read(DeltaRead)
        }
        let next = deltaReads.withLock { state -> Next in
            let generation = state.commits[account, default: 0]
            if let done = state.done[key], done.generation == generation { return .answered(done.delta) }
            if let running = state.running[key], running.generation == generation {
                running.waiters.append(completion)
                return .waiting
            }
            let read = DeltaRead(generation: generation, waiter: completion)
            state.running[key] = read
            return .read(read)
        }
        switch next {
        case .answered(let delta): return completion(.success(delta))
        case .waiting: return
        case .read(let read):
            let deltaReads = deltaReads
            readDelta(account: account, mailbox: mailbox, since: highestModseq) { result in
                let waiters = deltaReads.withLock {
                    state -> [@Sendable (Result<IMAPMailboxDelta?, IMAPBackendError>) -> Void] in
                    if state.running[key] === read { state.running[key] = nil }
                    if case .success(let delta) = result, state.commits[account, default: 0] == read.generation {
                        // Bounded: a thousand mailboxes' answers at most, kept only until their account changes.
                        if state.done.count >= 1024 { state.done = [:] }
                        state.done[key] = (read.generation, delta)
                    }
                    defer { read.waiters = [] }
                    return read.waiters
                }
                for waiter in waiters { waiter(result) }
            }
        }
    }

    private func readDelta(
        account: Int64, mailbox: String, since highestModseq: Int64,
        completion: @escaping @Sendable (Result<IMAPMailboxDelta?, IMAPBackendError>) -> Void
    ) {
        let store = store
        deltaStoreReads.withLock { $0 += 1 }
        run(completion) {
            let named = try await Self.mailbox(named: mailbox, account: account, store: store)
            // The HIGHESTMODSEQ given was the store's modseq plus one.
            let delta: MailboxDelta
            do {
                guard
                    let read = try await store.mailboxDelta(
                        accountID: account, mailbox: named.id, since: highestModseq - 1)
                else { return nil }
                delta = read
            } catch MailboxStoreError.notFound {
                throw IMAPBackendError.noMailbox
            }
            return IMAPMailboxDelta(
                changed: delta.entries.map {
                    IMAPMessageState(
                        uid: UInt32(truncatingIfNeeded: $0.uid), id: $0.id, seen: $0.seen, flagged: $0.flagged,
                        modseq: Self.imapModseq($0.modseq), keywords: $0.keywords)
                }, movedIn: delta.movedIn, left: Set(delta.left),
                uidNext: UInt32(truncatingIfNeeded: max(delta.uidNext, (delta.entries.last?.uid ?? 0) + 1)),
                highestModseq: Self.imapModseq(delta.modseq))
        }
    }

    func contents(
        account: Int64, ids: [String],
        completion: @escaping @Sendable (Result<[String: IMAPMessageContent], IMAPBackendError>) -> Void
    ) {
        let store = store
        run(completion) {
            var contents: [String: IMAPMessageContent] = [:]
            // In slices, so one FETCH 1:* over a large mailbox does not hold every message at once in one read.
            for start in stride(from: 0, to: ids.count, by: 200) {
                let slice = Array(ids[start..<min(ids.count, start + 200)])
                let read = try await store.messages(ids: slice, accountID: account, sources: true)
                for record in read.records {
                    guard let source = read.sources[record.id] else { continue }
                    contents[record.id] = IMAPMessageContent(
                        raw: source.rfc5322, receivedAt: record.receivedAt, envelope: Self.envelope(record),
                        text: record.body, sentAt: record.sentAt)
                }
            }
            return contents
        }
    }

    static func envelope(_ record: MessageRecord) -> IMAPEnvelope {
        var from: [MailAddress] = []
        if !record.from.isEmpty {
            if let open = record.from.lastIndex(of: "<"), let close = record.from.lastIndex(of: ">"), open < close {
                let name = record.from[..<open].trimmingCharacters(in: CharacterSet(charactersIn: " \""))
                from = [MailAddress(name: name, address: String(record.from[record.from.index(after: open)..<close]))]
            } else {
                from = [MailAddress(name: "", address: record.from)]
            }
        }
        let date = record.sentAt.map(IMAPResponse.rfc5322Date)
        return IMAPEnvelope(
            date: date, subject: record.subject, from: from,
            to: record.recipients, cc: record.cc,
            inReplyTo: record.inReplyTo.map { $0.hasPrefix("<") ? $0 : "<\($0)>" },
            messageID: record.messageID.map { $0.hasPrefix("<") ? $0 : "<\($0)>" })
    }

    func setFlags(
        account: Int64, changes: [IMAPFlagChange],
        completion: @escaping @Sendable (Result<[IMAPMessageState], IMAPBackendError>) -> Void
    ) {
        let (store, feed) = (store, feed)
        let startedAt = store.currentTime
        run(completion) {
            var states: [IMAPMessageState] = []
            for change in changes {
                let record = try await store.updateMessage(
                    id: change.id, accountID: account, seen: change.seen, flagged: change.flagged,
                    addingKeywords: change.addingKeywords, removingKeywords: change.removingKeywords)
                let uid = try await store.messageUID(id: change.id, accountID: account)
                states.append(
                    IMAPMessageState(
                        uid: UInt32(truncatingIfNeeded: uid), id: record.id, seen: record.seen,
                        flagged: record.flagged, modseq: Self.imapModseq(record.modseq), keywords: record.keywords))
            }
            // A STORE is an IMAP write: the arrival of the change it committed last.
            if let newest = states.map(\.modseq).max() {
                Self.arrived(feed, store: store, account: account, imapModseq: newest, startedAt: startedAt)
            }
            return states
        }
    }

    func move(
        account: Int64, ids: [String], to mailbox: String,
        completion: @escaping @Sendable (Result<IMAPMoveResult, IMAPBackendError>) -> Void
    ) {
        let store = store
        run(completion) {
            let named = try await Self.mailbox(named: mailbox, account: account, store: store)
            var states: [IMAPMessageState] = []
            for id in ids {
                let record = try await store.updateMessage(id: id, accountID: account, mailbox: named.id)
                let uid = try await store.messageUID(id: id, accountID: account)
                states.append(
                    IMAPMessageState(
                        uid: UInt32(truncatingIfNeeded: uid), id: id, seen: record.seen, flagged: record.flagged,
                        modseq: Self.imapModseq(record.modseq), keywords: record.keywords))
            }
            let mailboxID = try await store.mailboxRowID(accountID: account, mailbox: named.id)
            return IMAPMoveResult(
                uidValidity: Self.uidValidity(epoch: store.epoch, mailboxID: mailboxID), states: states)
        }
    }

    func append(
        account: Int64, mailbox: String, message: IMAPNewMessage,
        completion: @escaping @Sendable (Result<IMAPMoveResult, IMAPBackendError>) -> Void
    ) {
        let (store, feed) = (store, feed)
        let startedAt = store.currentTime
        run(completion) {
            let named = try await Self.mailbox(named: mailbox, account: account, store: store)
            guard let username = try await store.username(accountID: account) else { throw IMAPBackendError.noMailbox }
            var filed = MessageParts.ingested(message.raw, recipient: username, envelopeSender: "")
            (filed.mailbox, filed.seen, filed.flagged) = (named.id, message.seen, message.flagged)
            filed.keywords = message.keywords
            filed.deduplicates = false  // a client filing the same bytes twice has two messages
            filed.receivedAt = message.receivedAt
            let result = try await Self.file([filed], account: account, in: named.id, store: store)
            if let state = result.states.last {
                Self.arrived(feed, store: store, account: account, imapModseq: state.modseq, startedAt: startedAt)
            }
            return result
        }
    }

    /// A QRESYNC from one HIGHESTMODSEQ to another: a device's fetch from the account's modseq before the first to
    /// that of the second (a HIGHESTMODSEQ is the account's modseq, plus one).
    func resynchronized(account: Int64, since: Int64, reached: Int64) {
        guard let feed, feed.isObserved else { return }
        let now = store.currentTime
        feed.fetched(
            Fetch(
                sessionID: nil, path: .imap, accountID: account, since: max(0, Self.storeModseq(since)),
                modseq: Self.storeModseq(reached), startedAt: now, at: now))
    }

    func copy(
        account: Int64, ids: [String], to mailbox: String,
        completion: @escaping @Sendable (Result<IMAPMoveResult, IMAPBackendError>) -> Void
    ) {
        let store = store
        run(completion) {
            let named = try await Self.mailbox(named: mailbox, account: account, store: store)
            guard let username = try await store.username(accountID: account) else { throw IMAPBackendError.noMailbox }
            let read = try await store.messages(ids: ids, accountID: account, sources: true)
            let records = Dictionary(read.records.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
            let sources = read.sources
            // Each copy is a new message with the original's bytes, flags and INTERNALDATE.
            let copies = try ids.map { id in
                guard let record = records[id], let source = sources[id] else { throw MailboxStoreError.notFound }
                var copy = MessageParts.ingested(source.rfc5322, recipient: username, envelopeSender: "")
                (copy.mailbox, copy.seen, copy.flagged) = (named.id, record.seen, record.flagged)
                copy.keywords = record.keywords
                copy.deduplicates = false  // the bytes of a message the account has: a copy is a new message
                copy.receivedAt = record.receivedAt
                return copy
            }
            return try await Self.file(copies, account: account, in: named.id, store: store)
        }
    }

    /// Stores messages a client filed, in order, and answers their UIDs in the mailbox: a message's UID is the modseq
    /// it was stored at.
    private static func file(
        _ messages: [NewMessage], account: Int64, in mailbox: MailboxID, store: MailboxStore
    ) async throws -> IMAPMoveResult {
        var states: [IMAPMessageState] = []
        for message in messages {
            let receipt = try await store.deliver(message)
            states.append(
                IMAPMessageState(
                    uid: UInt32(truncatingIfNeeded: receipt.state.modseq), id: receipt.id, seen: message.seen,
                    flagged: message.flagged, modseq: imapModseq(receipt.state.modseq),
                    keywords: Array(Set(message.keywords)).sorted()))
        }
        let mailboxID = try await store.mailboxRowID(accountID: account, mailbox: mailbox)
        return IMAPMoveResult(uidValidity: uidValidity(epoch: store.epoch, mailboxID: mailboxID), states: states)
    }

    func createMailbox(
        account: Int64, name: String, completion: @escaping @Sendable (Result<Void, IMAPBackendError>) -> Void
    ) {
        let store = store
        run(completion) {
            guard Self.roleMailbox(named: name) == nil else { throw IMAPBackendError.mailboxExists }
            try await store.createMailbox(accountID: account, name: name)
        }
    }

    func deleteMailbox(
        account: Int64, name: String, completion: @escaping @Sendable (Result<Void, IMAPBackendError>) -> Void
    ) {
        let store = store
        run(completion) {
            let named = try await Self.mailbox(named: name, account: account, store: store)
            do {
                try await store.destroyMailbox(accountID: account, id: named.id, removingMessages: true)
            } catch MailboxStoreError.notFound {
                throw IMAPBackendError.noMailbox
            }
        }
    }

    func renameMailbox(
        account: Int64, from name: String, to newName: String,
        completion: @escaping @Sendable (Result<Void, IMAPBackendError>) -> Void
    ) {
        let store = store
        run(completion) {
            let named = try await Self.mailbox(named: name, account: account, store: store)
            guard Self.roleMailbox(named: newName) == nil else { throw IMAPBackendError.mailboxExists }
            do {
                try await store.renameMailbox(accountID: account, id: named.id, to: newName)
            } catch MailboxStoreError.notFound {
                throw IMAPBackendError.noMailbox
            }
        }
    }

    func expunge(
        account: Int64, ids: [String], completion: @escaping @Sendable (Result<Void, IMAPBackendError>) -> Void
    ) {
        let store = store
        run(completion) {
            for id in ids {
                do {
                    try await store.destroyMessage(id: id, accountID: account)
                } catch MailboxStoreError.notFound {
                    continue  // gone already: expunged is what was asked
                }
            }
        }
    }

    func watch(account: Int64, connection: UInt64) {
        watchers.withLock { state in
            state.byAccount[account, default: []].insert(connection)
            state.accounts[connection] = account
        }
    }

    func unwatch(connection: UInt64) {
        watchers.withLock { state in
            guard let account = state.accounts.removeValue(forKey: connection) else { return }
            state.byAccount[account]?.remove(connection)
            if state.byAccount[account]?.isEmpty == true { state.byAccount[account] = nil }
        }
    }
}
