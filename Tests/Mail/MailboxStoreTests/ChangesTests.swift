import Foundation
import MailboxStore
import Testing

/// A client-side replica that applies pages of changes, as MailSync does.
struct Replica: Equatable {
    var messages: [String: MessageRecord] = [:]

    mutating func apply(_ changes: Changes) {
        for message in changes.created + changes.updated { messages[message.id] = message }
        for id in changes.destroyed { messages[id] = nil }
    }
}

/// A deterministic random source, so a failing interleaving can be replayed from its seed.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite struct ChangesTests {
    func serverMailbox(_ f: StoreFixture, _ account: Int64) async throws -> [String: MessageRecord] {
        var all: [String: MessageRecord] = [:]
        var cursor: String?
        repeat {
            let page = try await f.store.listMessages(accountID: account, cursor: cursor, limit: 1000)
            for message in page.messages { all[message.id] = message }
            cursor = page.nextCursor
        } while cursor != nil
        return all
    }

    func sync(
        _ f: StoreFixture, _ account: Int64, from state: SyncState, into replica: inout Replica, max: Int
    )
        async throws -> SyncState
    {
        var current = state
        while true {
            let page = try await f.store.changes(accountID: account, since: current, maxChanges: max)
            #expect(page.oldState == current)
            replica.apply(page)
            current = page.newState
            if !page.hasMore { return current }
        }
    }

    /// Random interleavings of deliver, flag, move and destroy. From any earlier state, applying every page of
    /// changes to a replica of that moment reproduces the server's mailbox exactly.
    @Test(arguments: StoreEngineKind.allCases, [1, 2, 3, 4, 5, 6])
    func deltaSyncConvergesFromAnyEarlierState(engine: StoreEngineKind, seed: UInt64) async throws {
        var random = SeededGenerator(state: seed)
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        var snapshots: [(SyncState, [String: MessageRecord])] = [
            (try await f.store.currentState(accountID: alice.id), [:])
        ]
        var live: [String] = []
        for step in 0..<120 {
            let roll = Int.random(in: 0..<10, using: &random)
            if roll < 4 || live.isEmpty {
                live.append(try await f.deliver(to: "alice", subject: "s\(step)").id)
            } else if roll < 6 {
                let id = live.randomElement(using: &random)!
                try await f.store.updateMessage(
                    id: id, accountID: alice.id, seen: Bool.random(using: &random),
                    flagged: Bool.random(using: &random))
            } else if roll < 8 {
                let id = live.randomElement(using: &random)!
                try await f.store.updateMessage(
                    id: id, accountID: alice.id, mailbox: MailboxID(MailboxRole.allCases.randomElement(using: &random)!)
                )
            } else {
                let index = Int.random(in: 0..<live.count, using: &random)
                try await f.store.destroyMessage(id: live.remove(at: index), accountID: alice.id)
            }
            if step % 7 == 0 {
                await snapshots.append(
                    (try await f.store.currentState(accountID: alice.id), try serverMailbox(f, alice.id)))
            }
        }
        let server = try await serverMailbox(f, alice.id)
        let final = try await f.store.currentState(accountID: alice.id)
        for (state, mailbox) in snapshots {
            for pageSize in [1, 7, 500] {
                var replica = Replica(messages: mailbox)
                let reached = try await sync(f, alice.id, from: state, into: &replica, max: pageSize)
                #expect(reached == final)
                #expect(replica.messages == server, "seed \(seed), from \(state), pages of \(pageSize)")
            }
        }
    }

    @Test(arguments: StoreEngineKind.allCases) func createdUpdatedAndDestroyedAreClassifiedFromTheClientsPointOfView(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        let old = try await f.deliver(to: "alice").id
        let doomed = try await f.deliver(to: "alice").id
        let since = try await f.store.currentState(accountID: alice.id)
        let fresh = try await f.deliver(to: "alice").id
        let ephemeral = try await f.deliver(to: "alice").id
        try await f.store.updateMessage(id: old, accountID: alice.id, seen: true)
        try await f.store.updateMessage(id: fresh, accountID: alice.id, flagged: true)
        try await f.store.destroyMessage(id: doomed, accountID: alice.id)
        try await f.store.destroyMessage(id: ephemeral, accountID: alice.id)
        let changes = try await f.store.changes(accountID: alice.id, since: since)
        #expect(changes.created.map(\.id) == [fresh])
        #expect(changes.updated.map(\.id) == [old])
        #expect(changes.destroyed == [doomed])
        #expect(!changes.hasMore)
        #expect(changes.newState == (try await f.store.currentState(accountID: alice.id)))
        let none = try await f.store.changes(accountID: alice.id, since: changes.newState)
        #expect(none.created.isEmpty && none.updated.isEmpty && none.destroyed.isEmpty && !none.hasMore)
    }

    @Test(arguments: StoreEngineKind.allCases) func foreignMalformedFutureAndExpiredStatesCannotBeUsed(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine, retention: 60)
        let alice = try await f.account("alice")
        let start = try await f.store.currentState(accountID: alice.id)
        let id = try await f.deliver(to: "alice").id
        try await f.store.destroyMessage(id: id, accountID: alice.id)

        #expect(throws: MailboxStoreError.malformedState) { try f.store.parseState("garbage") }
        #expect(throws: MailboxStoreError.malformedState) { try f.store.parseState("\(f.store.epoch)-") }
        #expect(throws: MailboxStoreError.malformedState) { try f.store.parseState("\(f.store.epoch)--1") }
        // One spelling per state (found by the fuzzer: "-01" was read as "-1").
        #expect(throws: MailboxStoreError.malformedState) { try f.store.parseState("\(f.store.epoch)-01") }
        #expect(try f.store.parseState("\(f.store.epoch)-0").modseq == 0)
        #expect(throws: MailboxStoreError.cannotCalculateChanges) { try f.store.parseState("0123456789abcdef-1") }
        let other = try StoreFixture(engine: engine)
        await #expect(throws: MailboxStoreError.cannotCalculateChanges) {
            try await other.store.changes(accountID: alice.id, since: start)
        }
        await #expect(throws: MailboxStoreError.cannotCalculateChanges) {
            try await f.store.changes(accountID: alice.id, since: SyncState(epoch: f.store.epoch, modseq: 99))
        }
        // Still within retention: the old state works.
        #expect(try await f.store.changes(accountID: alice.id, since: start).destroyed == [])
        f.advance(61)
        #expect(try await f.store.purgeTombstones() == 1)
        await #expect(throws: MailboxStoreError.cannotCalculateChanges) {
            try await f.store.changes(accountID: alice.id, since: start)
        }
        // The current state still works after the purge.
        let now = try await f.store.currentState(accountID: alice.id)
        #expect(try await f.store.changes(accountID: alice.id, since: now).hasMore == false)
    }
}
