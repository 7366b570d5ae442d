import JSONText
import Locking
import MailMIME
import MailboxStore

/// The per-type states of one account at one moment (RFC 8620 §7.1), all made from the store's counters.
public struct TypeStates: Sendable, Equatable {
    /// The account's modseq: also the event id of a StateChange (`Last-Event-ID` replays from it).
    public var modseq: Int64
    /// Type name → state string, for every type this server has.
    public var states: [String: String]

    /// The types a StateChange may name.
    public static let types = ["Email", "Mailbox", "Thread", "EmailDelivery"]

    /// The states the store's counters make: `Email` and `Mailbox` change with every change, `Thread` when an
    /// email arrives or is destroyed, `EmailDelivery` when one arrives.
    public init(_ counters: ChangeCounters, epoch: String) {
        func state(_ modseq: Int64) -> String { SyncState(epoch: epoch, modseq: modseq).description }
        modseq = counters.modseq
        states = [
            "Email": state(counters.modseq), "Mailbox": state(counters.modseq),
            "Thread": state(counters.membershipModseq), "EmailDelivery": state(counters.deliveryModseq),
        ]
    }

    /// The states of the types that changed after the account's modseq `since`.
    func changed(since: Int64, of counters: ChangeCounters) -> [String: String] {
        let last = [
            "Email": counters.modseq, "Mailbox": counters.modseq, "Thread": counters.membershipModseq,
            "EmailDelivery": counters.deliveryModseq,
        ]
        return states.filter { name, _ in (last[name] ?? 0) > since }
    }
}

extension JMAPServer {
    /// The account's current per-type states.
    public func typeStates(accountID: Int64) async throws -> TypeStates {
        TypeStates(try await store.changeCounters(accountID: accountID), epoch: store.epoch)
    }

    /// The account's modseq alone: one row, read before anything heavier to learn whether anything changed.
    public func modseq(accountID: Int64) async throws -> Int64 {
        try await store.currentState(accountID: accountID).modseq
    }

    /// A StateChange object (RFC 8620 §7.1) for `account` naming `states` (those of `types` only, `nil`: all).
    public static func stateChange(
        _ states: [String: String], account: JMAPAccount, types: Set<String>?
    ) -> JSONValue? {
        let named = states.filter { types?.contains($0.key) ?? true }
        guard !named.isEmpty else { return nil }
        return [
            "@type": "StateChange", "changed": [account.jmapID: .object(named.mapValues(JSONValue.string))],
        ]
    }

    /// A blob's bytes and media type: a message's raw form (`M…`) or one of its parts (`P…_2_1`), `nil` when the
    /// account has no such blob (another account's blob is as absent as one that never existed).
    public func blob(_ blobID: String, accountID: Int64) async throws -> (bytes: [UInt8], type: String)? {
        let messageID: String
        var partID: String?
        if blobID.hasPrefix("M") {
            messageID = String(blobID.dropFirst())
        } else if blobID.hasPrefix("P"), let split = blobID.dropFirst().firstIndex(of: "_") {
            messageID = String(blobID[blobID.index(after: blobID.startIndex)..<split])
            partID = blobID[blobID.index(after: split)...].replacingOccurrences(of: "_", with: ".")
        } else {
            return nil
        }
        guard !messageID.isEmpty, messageID.utf8.count <= 64,
            let source = try await store.messageSource(id: messageID, accountID: accountID)
        else { return nil }
        let raw = source.rfc5322
        guard let partID else { return (raw, "message/rfc822") }
        guard let part = MIMEMessage.part(partID, of: raw) else { return nil }
        return (part.bytes, part.contentType)
    }
}

/// Wakes the event streams of an account when any instance commits a change to it, with the account's modseq after
/// the commit, so a stream learns of the change without reading the store first: this process's commits at once,
/// other instances' through the process's one LISTEN (``MailboxStore/observeChangesOfEveryInstance(_:)``). When
/// that LISTEN was lost and made again, every stream looks once for itself (a ``Wakeup/missed``).
public final class AccountWakeups: Sendable {
    /// Why a stream woke.
    public enum Wakeup: Sendable, Equatable {
        /// This process committed a change to the account; its modseq is now at least this.
        case committed(modseq: Int64)
        /// Other instances' changes may have been missed (the LISTEN was made again): look at the account's state.
        case missed
    }

    /// One subscription: what wakes it.
    private struct Subscriber {
        var wake: @Sendable (Wakeup) -> Void
    }

    private struct Subscribers {
        var next = 0
        var byAccount: [Int64: [Int: Subscriber]] = [:]
        /// Per account with subscribers, the newest read of its type states, started after the commit of `modseq`.
        var reads: [Int64: (modseq: Int64, read: Task<TypeStates?, Never>)] = [:]
    }

    private let subscribers = LockedValue(Subscribers())

    /// Watches `store`'s commits.
    public init(store: MailboxStore) {
        store.observeChangesOfEveryInstance { [weak self] changes in self?.tell(changes) }
    }

    private func tell(_ changes: [CommittedChange]) {
        if changes.contains(where: { $0.accountID == CommittedChange.everyAccount }) {
            let all = subscribers.withLock { $0.byAccount.values.flatMap { Array($0.values) } }
            for subscriber in all { subscriber.wake(.missed) }
            return
        }
        var newest: [Int64: Int64] = [:]
        for change in changes { newest[change.accountID] = max(newest[change.accountID] ?? .min, change.modseq) }
        let woken = subscribers.withLock { state in
            newest.flatMap { account, modseq in
                (state.byAccount[account].map { Array($0.values) } ?? []).map { ($0, modseq) }
            }
        }
        for (subscriber, modseq) in woken { subscriber.wake(.committed(modseq: modseq)) }
    }

    /// Calls `wake` (on the committing thread: it must not block) after each commit to `accountID`, until
    /// ``unsubscribe(_:accountID:)`` is called with the returned id. One subscription serves all of an account's
    /// streams or sockets: whoever holds them wakes them.
    public func subscribe(accountID: Int64, wake: @escaping @Sendable (Wakeup) -> Void) -> Int {
        subscribers.withLock { state in
            state.next += 1
            state.byAccount[accountID, default: [:]][state.next] = Subscriber(wake: wake)
            return state.next
        }
    }

    /// The account's type states as of a commit of at least `modseq`, read once for every stream the commit woke:
    /// the first stream to ask starts `read`, the others await the same read, so a change fanned out to a thousand
    /// streams of one account costs one read, not a thousand. `nil` if the read failed.
    public func typeStates(
        accountID: Int64, atLeast modseq: Int64, read: @escaping @Sendable () async throws -> TypeStates
    ) async -> TypeStates? {
        let shared = subscribers.withLock { state -> Task<TypeStates?, Never> in
            if let entry = state.reads[accountID], entry.modseq >= modseq { return entry.read }
            let task = Task { try? await read() }
            // An account without subscribers keeps no read (the last unsubscribe drops it).
            if state.byAccount[accountID] != nil { state.reads[accountID] = (modseq, task) }
            return task
        }
        let states = await shared.value
        if states == nil {
            // A failed read is not kept: the next stream to ask reads again.
            subscribers.withLock { state in
                if state.reads[accountID]?.read == shared { state.reads[accountID] = nil }
            }
        }
        return states
    }

    /// Ends a subscription.
    public func unsubscribe(_ id: Int, accountID: Int64) {
        subscribers.withLock { state in
            state.byAccount[accountID]?.removeValue(forKey: id)
            if state.byAccount[accountID]?.isEmpty == true {
                state.byAccount[accountID] = nil
                state.reads[accountID] = nil
            }
        }
    }

    /// How many subscriptions there are (for tests and metrics).
    public var count: Int { subscribers.withLock { $0.byAccount.values.reduce(0) { $0 + $1.count } } }
}
