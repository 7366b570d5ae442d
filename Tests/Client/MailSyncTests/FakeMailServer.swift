import Foundation
import Locking
import MailSync
import TestSupport

/// An in-process mailbox server speaking the transport protocol, with fault injection.
final class FakeMailServer: MailTransport {
    enum Fault: Sendable, Equatable {
        case pass
        case network
        case status(Int)
        case unauthorized
        case cannotCalculateChanges
        /// Never answers (until cancelled).
        case hang
    }

    struct Call: Sendable, Equatable {
        var endpoint: String
        var argument: String?
    }

    private struct State {
        var messages: [String: MailMessage] = [:]
        var createdAt: [String: Int] = [:]
        var log: [(modseq: Int, id: String)] = []
        var modseq = 0
        var floor = 0
        var nextID = 1
        var faults: [Fault] = []
        var calls: [Call] = []
        var gateClosed = false
        /// Requests held at the closed gate, by id; each is resumed with whether it was cancelled.
        var held: [Int: CheckedContinuation<Bool, Never>] = [:]
        var nextHeld = 0
        var requestsStarted = 0
    }

    let epoch: String
    private let state = LockedValue(State())

    init(epoch: String = "e1") { self.epoch = epoch }

    // MARK: - Server-side operations

    var currentState: String { state.withLock { "\(epoch)-\($0.modseq)" } }

    var mailbox: [MailMessage] {
        state.withLock { Array($0.messages.values) }.sorted { $0.id < $1.id }
    }

    var calls: [Call] { state.withLock { $0.calls } }
    var requestsStarted: Int { state.withLock { $0.requestsStarted } }

    @discardableResult
    func deliver(subject: String = "hello", bodySize: Int = 20, mailbox: MailboxID = .inbox) -> String {
        state.withLock { s in
            let id = String(format: "m%05d", s.nextID)
            s.nextID += 1
            s.modseq += 1
            let body = String(repeating: "b", count: bodySize)
            s.messages[id] = MailMessage(
                id: id, mailbox: mailbox, from: "sender@example.com", to: [MailAddress(address: "alice")],
                subject: subject,
                preview: String(body.prefix(40)), size: bodySize, receivedAt: Double(1_700_000_000 + s.modseq),
                body: body)
            s.createdAt[id] = s.modseq
            s.log.append((s.modseq, id))
            return id
        }
    }

    func modify(_ id: String, _ change: (inout MailMessage) -> Void) {
        state.withLock { s in
            guard var message = s.messages[id] else { return }
            change(&message)
            s.modseq += 1
            s.messages[id] = message
            s.log.append((s.modseq, id))
        }
    }

    func destroy(_ id: String) {
        state.withLock { s in
            guard s.messages.removeValue(forKey: id) != nil else { return }
            s.modseq += 1
            s.log.append((s.modseq, id))
        }
    }

    /// Forgets the change log: older states can no longer be served.
    func compact() { state.withLock { $0.floor = $0.modseq } }

    /// Faults for the next requests (one per request, in order; `.pass` lets one through).
    func inject(_ faults: Fault...) { state.withLock { $0.faults.append(contentsOf: faults) } }

    /// Holds every request from now on until ``openGate()``.
    func closeGate() { state.withLock { $0.gateClosed = true } }

    /// Lets the held requests and later ones through.
    func openGate() {
        let held = state.withLock { state in
            state.gateClosed = false
            defer { state.held = [:] }
            return Array(state.held.values)
        }
        for request in held { request.resume(returning: false) }
    }

    /// Waits while the gate is closed; a request cancelled while it waits throws `CancellationError`.
    private func passGate() async throws {
        let id = state.withLock { state in
            state.nextHeld += 1
            return state.nextHeld
        }
        let cancelled = await withTaskCancellationHandler {
            await withCheckedContinuation { (request: CheckedContinuation<Bool, Never>) in
                let answer = state.withLock { state -> Bool? in
                    guard state.gateClosed else { return false }
                    guard !Task.isCancelled else { return true }
                    state.held[id] = request
                    return nil
                }
                if let answer { request.resume(returning: answer) }
            }
        } onCancel: {
            state.withLock { $0.held.removeValue(forKey: id) }?.resume(returning: true)
        }
        if cancelled { throw CancellationError() }
    }

    // MARK: - MailTransport

    func fetchChanges(since: String, max: Int) async throws -> MessageChanges {
        try await enter("changes", since)
        return try state.withLock { s in
            let parts = since.split(separator: "-")
            guard parts.count == 2, let modseq = Int(parts[1]) else { throw MailSyncError.invalidState }
            guard parts[0] == epoch, modseq >= s.floor, modseq <= s.modseq else {
                throw MailSyncError.cannotCalculateChanges
            }
            let pending = s.log.filter { $0.modseq > modseq }
            let taken = pending.prefix(max)
            let hasMore = taken.count < pending.count
            let newState = hasMore ? taken.last!.modseq : s.modseq
            var changes = MessageChanges(oldState: since, newState: "\(epoch)-\(newState)", hasMore: hasMore)
            var seen = Set<String>()
            for entry in taken where seen.insert(entry.id).inserted {
                if let message = s.messages[entry.id] {
                    let wire = Self.wire(message)
                    if s.createdAt[entry.id]! > modseq {
                        changes.created.append(wire)
                    } else {
                        changes.updated.append(wire)
                    }
                } else {
                    changes.destroyed.append(entry.id)
                }
            }
            return changes
        }
    }

    func fetchAllMessages(cursor: String?, limit: Int) async throws -> MessagePage {
        try await enter("messages", cursor)
        return state.withLock { s in
            let all = s.messages.values.sorted { $0.id < $1.id }
            let start = cursor.flatMap(Int.init) ?? 0
            let end = min(start + limit, all.count)
            return MessagePage(
                messages: all[start..<end].map(Self.wire), state: "\(epoch)-\(s.modseq)",
                nextCursor: end < all.count ? String(end) : nil)
        }
    }

    func fetchMessage(id: String) async throws -> MailMessage {
        try await enter("message", id)
        guard let message = state.withLock({ $0.messages[id] }) else { throw MailSyncError.notFound }
        return message
    }

    func updateMessage(id: String, _ update: MessageUpdate) async throws -> MailMessage {
        try await enter("update", id)
        guard state.withLock({ $0.messages[id] }) != nil else { throw MailSyncError.notFound }
        modify(id) { message in
            if let seen = update.seen { message.seen = seen }
            if let flagged = update.flagged { message.flagged = flagged }
            if let mailbox = update.mailbox { message.mailbox = mailbox }
        }
        return Self.wire(state.withLock { $0.messages[id]! })
    }

    func deleteMessage(id: String) async throws {
        try await enter("delete", id)
        guard state.withLock({ $0.messages[id] }) != nil else { throw MailSyncError.notFound }
        destroy(id)
    }

    /// The message as listings and changes carry it: the body only up to the inline limit.
    static func wire(_ message: MailMessage) -> MailMessage {
        var copy = message
        if copy.size > MailMessage.inlineBodyLimit { copy.body = nil }
        return copy
    }

    private func enter(_ endpoint: String, _ argument: String?) async throws {
        state.withLock {
            $0.calls.append(Call(endpoint: endpoint, argument: argument))
            $0.requestsStarted += 1
        }
        try await passGate()
        let fault = state.withLock { $0.faults.isEmpty ? Fault.pass : $0.faults.removeFirst() }
        switch fault {
        case .pass: return
        case .network: throw MailSyncError.network("connection reset")
        case .status(let status): throw MailSyncError.server(status: status, code: nil, retryAfter: nil)
        case .unauthorized: throw MailSyncError.unauthorized
        case .cannotCalculateChanges: throw MailSyncError.cannotCalculateChanges
        case .hang:
            try await Task.sleep(for: .seconds(600))
            throw MailSyncError.network("hung")
        }
    }
}

/// Collects a ``SyncEngine``'s events in the background.
final class EventRecorder: Sendable {
    private final class Store: Sendable {
        let events = LockedValue<[SyncEvent]>([])
    }

    private let store = Store()
    private let task: Task<Void, Never>

    init(_ engine: SyncEngine) {
        let store = self.store
        task = Task {
            for await event in engine.events { store.events.withLock { $0.append(event) } }
        }
    }

    deinit { task.cancel() }

    var events: [SyncEvent] { store.events.withLock { $0 } }

    var starts: Int {
        events.filter { if case .syncStarted = $0 { true } else { false } }.count
    }

    var retries: Int {
        events.filter { if case .retrying = $0 { true } else { false } }.count
    }

    /// Waits until `predicate` holds on the events.
    func wait(_ predicate: ([SyncEvent]) -> Bool) async -> Bool {
        await eventually { predicate(events) }
    }
}

/// A seeded generator, so random tests are reproducible.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The parts of a message a sync must reproduce (a large body is fetched on demand, so it is left out).
func syncedView(_ messages: [MailMessage]) -> [MailMessage] {
    messages.map(FakeMailServer.wire).sorted { $0.id < $1.id }
}

/// A fast retry policy for tests.
let quickRetries = SyncRetryPolicy(
    initialDelay: .milliseconds(1), multiplier: 2, maximumDelay: .milliseconds(10), maximumAttempts: 5)
