import Foundation
import HTTPServer
import JMAP
import Locking
import MailboxStore

/// The JMAP event streams (`GET /jmap/eventsource`, RFC 8620 §7.3) open on this process, held as data, not as
/// tasks: an idle stream costs its connection and a few hundred bytes here, and nothing runs for it until its
/// account changes or its ping is due.
///
/// Each account with streams holds one ``AccountWakeups`` subscription, which wakes it after commits with the
/// account's new states (read once for its streams and its WebSockets), and each stream is written its StateChange:
/// the changes of the types it asked for since what it was last sent. Pings come from one timer for every stream, which
/// every tenth of a second writes the streams whose ping is due: streams opened together ping spread as they opened,
/// not in one burst that would hold up the next StateChanges.
package final class JMAPEventStreams: Sendable {
    /// What a stream asked for when it opened.
    struct Options: Sendable {
        /// The types whose changes it is told of (`nil`: all).
        var types: Set<String>?
        /// It ends after its first StateChange (`closeafter=state`).
        var closeAfterState: Bool
        /// Seconds between its pings (0: none).
        var pingInterval: Int
    }

    private struct Stream {
        let stream: EventStream
        let account: JMAPAccount
        let options: Options
        /// The states it was last told of; `nil` while it opens (its first states are being read).
        var sent: TypeStates?
        /// A change arrived while it opened: it looks again once its first states are known.
        var changedWhileOpening = false
    }

    private struct AccountStreams {
        let subscription: Int
        var streams: [Int: Stream] = [:]
    }

    private struct State {
        var next = 0
        var accounts: [Int64: AccountStreams] = [:]
        /// Pings due, by the tenth of a second (of `origin`'s clock) they are due in.
        var pings: [Int64: [(accountID: Int64, id: Int)]] = [:]
        var pinger: Task<Void, Never>?
    }

    private let state = LockedValue(State())
    private let wakeups: AccountWakeups
    private let jmap: JMAPServer
    private let epoch: String
    private let origin = ContinuousClock.now

    init(wakeups: AccountWakeups, jmap: JMAPServer, epoch: String) {
        self.wakeups = wakeups
        self.jmap = jmap
        self.epoch = epoch
    }

    deinit { state.withLock { $0.pinger?.cancel() } }

    /// How many streams are open.
    package var count: Int { state.withLock { $0.accounts.values.reduce(0) { $0 + $1.streams.count } } }

    /// Opens a stream for `account`. With `lastSeen` (the modseq a `Last-Event-ID` names, -1 for one not ours) it
    /// is told at once what changed since. The stream is registered before its first states are read, so a commit
    /// made meanwhile is not missed.
    func open(account: JMAPAccount, options: Options, lastSeen: Int64?) async throws -> EventStream {
        let stream = EventStream()
        let id = register(Stream(stream: stream, account: account, options: options), accountID: account.id)
        stream.onTermination { [weak self] in self?.remove(id, accountID: account.id) }
        let baseline: TypeStates
        do {
            baseline = try await jmap.typeStates(accountID: account.id)
        } catch {
            remove(id, accountID: account.id)
            throw error
        }
        if let lastSeen, lastSeen != baseline.modseq,
            let change = JMAPServer.stateChange(baseline.states, account: account, types: options.types)
        {
            stream.send(event: "state", id: eventID(baseline.modseq), data: change.json)
            if options.closeAfterState {
                remove(id, accountID: account.id)
                stream.close()
                return stream
            }
        }
        let changed = state.withLock { state -> Bool in
            guard state.accounts[account.id]?.streams[id] != nil else { return false }
            state.accounts[account.id]?.streams[id]?.sent = baseline
            return state.accounts[account.id]?.streams[id]?.changedWhileOpening ?? false
        }
        if changed { wakeups.look(accountID: account.id) }
        return stream
    }

    /// An event's id: the account's state when it was sent, which `Last-Event-ID` names back.
    private func eventID(_ modseq: Int64) -> String { SyncState(epoch: epoch, modseq: modseq).description }

    private func register(_ stream: Stream, accountID: Int64) -> Int {
        let (id, subscribe) = state.withLock { state -> (Int, Bool) in
            state.next += 1
            if stream.options.pingInterval > 0 {
                schedulePing(&state, accountID: accountID, id: state.next, in: stream.options.pingInterval)
            }
            state.accounts[accountID]?.streams[state.next] = stream
            return (state.next, state.accounts[accountID] == nil)
        }
        guard subscribe else { return id }
        // The first stream of the account: subscribe outside the lock (a commit may wake at once), then file the
        // stream with the subscription, unless another stream of the account got there first.
        let subscription = wakeups.subscribe(accountID: accountID) { [weak self] wakeup in
            self?.wake(accountID: accountID, wakeup)
        }
        let redundant = state.withLock { state -> Bool in
            let had = state.accounts[accountID] != nil
            if !had { state.accounts[accountID] = AccountStreams(subscription: subscription) }
            state.accounts[accountID]?.streams[id] = stream
            return had
        }
        if redundant { wakeups.unsubscribe(subscription, accountID: accountID) }
        return id
    }

    private func remove(_ id: Int, accountID: Int64) {
        let subscription = state.withLock { state -> Int? in
            guard var account = state.accounts[accountID], account.streams.removeValue(forKey: id) != nil else {
                return nil
            }
            guard account.streams.isEmpty else {
                state.accounts[accountID] = account
                return nil
            }
            state.accounts[accountID] = nil
            return account.subscription
        }
        if let subscription { wakeups.unsubscribe(subscription, accountID: accountID) }
    }

    // MARK: Changes

    /// The account's states after commits (from its reading task, which wakes the account's subscribers one read
    /// after another). When they could not be read, nothing is sent until the next change.
    private func wake(accountID: Int64, _ wakeup: AccountWakeups.Wakeup) {
        guard case .states(let now, _) = wakeup else { return }
        tell(accountID: accountID, now)
    }

    /// Tells each of the account's streams what changed since it was last told, in the types it asked for.
    private func tell(accountID: Int64, _ now: TypeStates) {
        let sends = state.withLock { state -> [(EventStream, String, Bool)] in
            guard var account = state.accounts[accountID] else { return [] }
            defer { state.accounts[accountID] = account }
            var sends: [(EventStream, String, Bool)] = []
            for (id, stream) in account.streams {
                guard let sent = stream.sent else {
                    account.streams[id]?.changedWhileOpening = true
                    continue
                }
                guard now.modseq > sent.modseq else { continue }
                account.streams[id]?.sent = now
                let changed = now.states.filter { sent.states[$0.key] != $0.value }
                guard
                    let change = JMAPServer.stateChange(changed, account: stream.account, types: stream.options.types)
                else { continue }
                sends.append((stream.stream, change.json, stream.options.closeAfterState))
            }
            return sends
        }
        let id = eventID(now.modseq)
        for (stream, change, closeAfter) in sends {
            stream.send(event: "state", id: id, data: change)
            // Its termination removes it from the account.
            if closeAfter { stream.close() }
        }
    }

    // MARK: Pings

    /// The pings' clock: tenths of a second since `origin`.
    private static let slotsPerSecond: Int64 = 10

    private func slot(_ instant: ContinuousClock.Instant = .now) -> Int64 {
        let elapsed = (instant - origin).components
        return elapsed.seconds * Self.slotsPerSecond + elapsed.attoseconds
            / (1_000_000_000_000_000_000 / Self.slotsPerSecond)
    }

    private func schedulePing(_ state: inout State, accountID: Int64, id: Int, in seconds: Int) {
        state.pings[slot() + Int64(seconds) * Self.slotsPerSecond, default: []].append((accountID, id))
        guard state.pinger == nil else { return }
        state.pinger = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1) / Int(Self.slotsPerSecond))
                guard self?.ping() == true else { return }
            }
        }
    }

    /// Writes a ping to each stream whose ping is due, and schedules its next. Returns false, and the timer ends,
    /// once no ping is scheduled (the next stream that asks for pings starts it again).
    private func ping() -> Bool {
        let now = slot()
        let due = state.withLock { state -> [(EventStream, Int)]? in
            var due: [(EventStream, Int)] = []
            for key in state.pings.keys where key <= now {
                for (accountID, id) in state.pings.removeValue(forKey: key) ?? [] {
                    guard let stream = state.accounts[accountID]?.streams[id] else { continue }
                    let interval = stream.options.pingInterval
                    schedulePing(&state, accountID: accountID, id: id, in: interval)
                    due.append((stream.stream, interval))
                }
            }
            if state.pings.isEmpty {
                state.pinger = nil
                return nil
            }
            return due
        }
        guard let due else { return false }
        for (stream, interval) in due { stream.send(event: "ping", data: "{\"interval\":\(interval)}") }
        return true
    }
}
