import Foundation
import Locking
import MailboxStore
import Push
import TestSupport
import Testing

/// Deliveries committed together share their account bookkeeping (one modseq write and one outbox upsert per
/// account per batch); these tests check that sharing is invisible: every change still gets its own modseq,
/// writes that do not defer see the deliveries before them, and a failed delivery fails alone.
@Suite struct GroupCommitTests {
    enum Outcome: Sendable {
        case delivered(DeliveryReceipt)
        case edited(MessageRecord)
        case refused(MailboxStoreError)
    }

    @Test(arguments: StoreEngineKind.allCases) func concurrentDeliveriesAndEditsGetDistinctModseqs(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine, synchronous: true)
        var accounts: [String: Account] = [:]
        for name in ["alice", "bob"] {
            let account = try await f.account(name)
            accounts[name] = account
            for n in 1...2 {
                try await f.store.registerDevice(
                    address: .apns(
                        StoreFixture.token(name == "alice" ? n : n + 10), topic: "com.example.mail",
                        environment: .sandbox), accountID: account.id, sessionID: nil)
            }
        }
        let alice = try #require(accounts["alice"])
        let seeded = try await f.deliver(to: "alice", subject: "seed")

        // Deliveries to two accounts and to nobody, and flag edits of alice's first message, all at once, so
        // batches mix deferring deliveries with writes that must see them.
        let outcomes = try await withThrowingTaskGroup(of: Outcome.self) { group in
            for i in 0..<60 {
                for name in ["alice", "bob"] {
                    group.addTask { .delivered(try await f.deliver(to: name, subject: "\(name) \(i)")) }
                }
                if i % 6 == 0 {
                    group.addTask {
                        do {
                            _ = try await f.deliver(to: "nobody", subject: "lost \(i)")
                            Issue.record("a delivery to an unknown account succeeded")
                            return .refused(.notFound)
                        } catch let error as MailboxStoreError {
                            return .refused(error)
                        }
                    }
                    group.addTask {
                        .edited(
                            try await f.store.updateMessage(
                                id: seeded.id, accountID: alice.id, seen: i % 12 == 0, flagged: i % 12 != 0))
                    }
                }
            }
            var all: [Outcome] = []
            for try await outcome in group { all.append(outcome) }
            return all
        }
        let statistics = f.store.writerStatistics
        #expect(statistics.batches == f.store.committedWriteBatches)
        #expect(statistics.commitSeconds > 0)
        if engine == .sqlite {
            // SQLite's single writer groups them; PostgreSQL runs each in its own transaction and the server groups
            // the WAL flushes of concurrent commits.
            #expect(f.store.committedWriteBatches < outcomes.count, "writes shared transactions")
            #expect(statistics.writes >= outcomes.count + 7, "every write is counted, refused ones included")
            #expect(statistics.writes > statistics.batches)
        }

        var modseqsByAccount: [Int64: [Int64]] = [:]
        // Edits race one another: one that finds the flags already as it would set them changes nothing and
        // answers with the modseq of the edit before it, so edits count once per state they left.
        var editModseqs: Set<Int64> = []
        var refusals = 0
        for outcome in outcomes {
            switch outcome {
            case .delivered(let receipt): modseqsByAccount[receipt.accountID, default: []].append(receipt.state.modseq)
            case .edited(let message): editModseqs.insert(message.modseq)
            case .refused(let error):
                #expect(error == .notFound)
                refusals += 1
            }
        }
        #expect(refusals == 10)
        modseqsByAccount[alice.id, default: []] += editModseqs

        for (name, account) in accounts {
            let modseqs = modseqsByAccount[account.id] ?? []
            #expect(Set(modseqs).count == modseqs.count, "\(name): no two changes share a modseq")
            let page = try await f.store.listMessages(accountID: account.id, limit: 1000)
            #expect(page.messages.count == (name == "alice" ? 61 : 60))
            let stored = page.messages.map(\.modseq)
            #expect(Set(stored).count == stored.count, "\(name): stored modseqs are distinct")
            // The account ends at its newest change, and a client that saw nothing gets every message.
            #expect(page.state.modseq == modseqs.max())
            #expect(page.state.modseq == stored.max())
            let changes = try await f.store.changes(
                accountID: account.id, since: SyncState(epoch: f.store.epoch, modseq: 0), maxChanges: 1000)
            #expect(Set(changes.created.map(\.id)) == Set(page.messages.map(\.id)))
            #expect(changes.newState == page.state)
        }

        // One outbox row per device, each holding its account's newest modseq.
        let claimed = try await f.store.claimDueSignals()
        #expect(claimed.count == 4)
        for item in claimed {
            let name = [1, 2].map(StoreFixture.token).contains(item.address.token) ? "alice" : "bob"
            let account = try #require(accounts[name])
            let state = try await f.store.listMessages(accountID: account.id, limit: 1).state
            #expect(item.modseq == state.modseq, "\(name)'s device holds the newest modseq")
            #expect(item.state == state)
        }
    }

    @Test(arguments: StoreEngineKind.allCases) func aFailedDeliveryLeavesNoGapAndNoSignal(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        try await f.store.registerDevice(
            address: .apns(StoreFixture.token(1), topic: "com.example.mail", environment: .sandbox),
            accountID: alice.id,
            sessionID: nil)
        for item in try await f.store.claimDueSignals() {
            try await f.store.completeSignal(item, sentModseq: item.modseq)
        }
        await #expect(throws: MailboxStoreError.notFound) { try await f.deliver(to: "bob") }
        #expect(try await f.store.outboxStats().depth == 0, "a refused delivery signals nobody")
        let receipt = try await f.deliver(to: "alice")
        #expect(receipt.state.modseq == 1, "the refused delivery used no modseq")
    }

    /// A caller on a thread of its own (the LMTP listener's sessions) hands deliveries to the store and waits for
    /// their commits: they share group commits with the async ones and answer alike, an unknown recipient too.
    @Test(arguments: StoreEngineKind.allCases) func deliveriesFromAThreadOfItsOwnCommitAndAnswerAlike(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine, synchronous: true)
        let alice = try await f.account("alice")
        let store = f.store
        let answers = try await offPool {
            let results = LockedValue([Result<DeliveryReceipt, any Error>?](repeating: nil, count: 21))
            let committed = DispatchGroup()
            for i in 0..<21 {
                committed.enter()
                let to = i == 20 ? "nobody" : "alice"
                store.deliver(NewMessage(to: to, from: "mta@example.com", subject: "LMTP \(i)", body: "Body")) {
                    let result = $0
                    results.withLock { $0[i] = result }
                    committed.leave()
                }
            }
            committed.wait()
            return results.withLock { $0 }
        }
        let asynchronous = try await f.deliver(to: "alice", subject: "async")
        let receipts = answers.prefix(20).compactMap { try? $0?.get() }
        #expect(receipts.count == 20)
        #expect(receipts.allSatisfy { $0.accountID == alice.id && !$0.duplicate })
        #expect(Set(receipts.map(\.state.modseq)).count == 20, "each delivery has its own modseq")
        #expect(receipts.map(\.state.modseq).max().map { $0 < asynchronous.state.modseq } == true)
        guard case .failure(MailboxStoreError.notFound)? = answers.last else {
            Issue.record("an unknown recipient is notFound: \(String(describing: answers.last))")
            return
        }
        let listed = try await f.store.listMessages(accountID: alice.id, limit: 100)
        #expect(listed.messages.count == 21)
    }
}
