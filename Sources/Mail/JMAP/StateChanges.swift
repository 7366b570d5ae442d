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

/// The one owner of a change's fan-out to JMAP's held connections (event streams and WebSockets): when any instance
/// commits a change to an account with subscribers, the account's new type states are read once and every
/// subscriber is woken with them. This process's commits are heard at once, other instances' through the process's one
/// LISTEN (``MailboxStore/observeChangesOfEveryInstance(_:)``).
///
/// One task at a time reads an account's states: commits that arrive while it reads are read by its next turn, so a
/// burst of commits costs one read in flight and one after it, whatever the number of streams and sockets, and an
/// account's subscribers are woken in the order of the reads. When the LISTEN was lost and made again, every
/// subscribed account is read afresh and its subscribers are told that changes may have been missed before.
public final class AccountWakeups: Sendable {
    /// What a subscriber is woken with.
    public enum Wakeup: Sendable, Equatable {
        /// The account's states after the commits since the last wake-up, read once for every subscriber. With
        /// `afterMiss`, other instances' commits may have been missed before them (the LISTEN was made again).
        case states(TypeStates, afterMiss: Bool)
        /// The account changed but its states could not be read: the next change reads again.
        case unread
    }

    /// One subscription: what wakes it.
    private struct Subscriber {
        var wake: @Sendable (Wakeup) -> Void
    }

    private struct Account {
        /// Which account entry this is: one made after the last subscriber left is another, and the reading task of
        /// the earlier one does not touch it.
        let generation: Int
        var subscribers: [Int: Subscriber] = [:]
        /// A read is wanted (a commit, or a subscriber that asked to look).
        var wanted = false
        /// Changes may have been missed before the wanted read.
        var afterMiss = false
        /// A task is reading the account's states; what arrives meanwhile waits in `wanted`.
        var reading = false
    }

    private struct Subscribers {
        var next = 0
        var accounts: [Int64: Account] = [:]
    }

    private let subscribers = LockedValue(Subscribers())
    private let read: @Sendable (_ accountID: Int64) async throws -> TypeStates

    /// Watches `store`'s commits; `read` reads an account's states (``JMAPServer/typeStates(accountID:)``).
    public init(store: MailboxStore, read: @escaping @Sendable (_ accountID: Int64) async throws -> TypeStates) {
        self.read = read
        store.observeChangesOfEveryInstance { [weak self] changes in self?.committed(changes) }
    }

    private func committed(_ changes: [CommittedChange]) {
        if changes.contains(where: { $0.accountID == CommittedChange.everyAccount }) {
            let accounts = subscribers.withLock { Array($0.accounts.keys) }
            for accountID in accounts { want(accountID, afterMiss: true) }
            return
        }
        for accountID in Set(changes.lazy.map(\.accountID)) { want(accountID, afterMiss: false) }
    }

    /// Reads the account's states and wakes its subscribers with them: for a subscriber that may have missed a change
    /// (one that was opening when it came).
    public func look(accountID: Int64) { want(accountID, afterMiss: false) }

    /// Asks for a read of the account's states, and starts its reading task unless one is running.
    private func want(_ accountID: Int64, afterMiss: Bool) {
        let start = subscribers.withLock { state -> Int? in
            guard var account = state.accounts[accountID] else { return nil }
            defer { state.accounts[accountID] = account }
            account.wanted = true
            account.afterMiss = account.afterMiss || afterMiss
            guard !account.reading else { return nil }
            account.reading = true
            return account.generation
        }
        if let generation = start { Task { await self.turns(accountID, generation: generation) } }
    }

    /// Reads the account's states and wakes its subscribers, turn after turn while reads are wanted.
    private func turns(_ accountID: Int64, generation: Int) async {
        while true {
            let afterMiss = subscribers.withLock { state -> Bool? in
                guard var account = state.accounts[accountID], account.generation == generation else { return nil }
                guard account.wanted else {
                    state.accounts[accountID]?.reading = false
                    return nil
                }
                defer { state.accounts[accountID] = account }
                let afterMiss = account.afterMiss
                (account.wanted, account.afterMiss) = (false, false)
                return afterMiss
            }
            guard let afterMiss else { return }
            let wakeup: Wakeup
            do {
                wakeup = .states(try await read(accountID), afterMiss: afterMiss)
            } catch {
                wakeup = .unread
            }
            let woken = subscribers.withLock { state in
                state.accounts[accountID].flatMap { $0.generation == generation ? Array($0.subscribers.values) : nil }
                    ?? []
            }
            for subscriber in woken { subscriber.wake(wakeup) }
        }
    }

    /// Calls `wake` (from the account's reading task: it must not block) after each commit to `accountID`, until
    /// ``unsubscribe(_:accountID:)`` is called with the returned id. One subscription serves all of an account's
    /// streams or sockets: whoever holds them wakes them.
    public func subscribe(accountID: Int64, wake: @escaping @Sendable (Wakeup) -> Void) -> Int {
        subscribers.withLock { state in
            state.next += 1
            state.accounts[accountID, default: Account(generation: state.next)].subscribers[state.next] = Subscriber(
                wake: wake)
            return state.next
        }
    }

    /// Ends a subscription.
    public func unsubscribe(_ id: Int, accountID: Int64) {
        subscribers.withLock { state in
            state.accounts[accountID]?.subscribers.removeValue(forKey: id)
            // A reading task finds the account gone and ends.
            if state.accounts[accountID]?.subscribers.isEmpty == true { state.accounts[accountID] = nil }
        }
    }

    /// How many subscriptions there are (for tests and metrics).
    public var count: Int { subscribers.withLock { $0.accounts.values.reduce(0) { $0 + $1.subscribers.count } } }
}
