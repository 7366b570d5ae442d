import Foundation
import JMAP
import Locking
import MailboxStore
import Testing

/// The fan-out of a commit to an account's streams: each stream is woken once, and the new state is read once.
@Suite struct AccountWakeupsTests {
    @Test("a commit wakes each of 1,000 streams of one account once, and they share one read of the new state")
    func oneReadForEveryStreamOfAnAccount() async throws {
        let fixture = try await JMAPFixture(.sqlite)
        let wakeups = AccountWakeups(store: fixture.store)
        let account = fixture.alice.id
        // Every subscriber's wake-ups, in one stream the test reads.
        let (woken, wake) = AsyncStream.makeStream(of: AccountWakeups.Wakeup.self)
        let streams = (0..<1_000).map { _ in wakeups.subscribe(accountID: account) { wake.yield($0) } }
        try await fixture.deliver(to: fixture.alice)
        let reads = LockedValue(0)
        let server = fixture.server
        let states = await withTaskGroup(of: TypeStates?.self) { group in
            for await wakeup in woken.prefix(streams.count) {
                group.addTask {
                    guard case .committed(let modseq) = wakeup else { return nil }
                    return await wakeups.typeStates(accountID: account, atLeast: modseq) {
                        reads.withLock { $0 += 1 }
                        return try await server.typeStates(accountID: account)
                    }
                }
            }
            return await group.reduce(into: [TypeStates?]()) { $0.append($1) }
        }
        let current = try await server.typeStates(accountID: account)
        #expect(states.count == 1_000 && states.allSatisfy { $0 == current })
        #expect(reads.withLock { $0 } == 1)

        // The next commit is read again, once.
        try await fixture.deliver(to: fixture.alice)
        let newer = try await fixture.server.modseq(accountID: account)
        for _ in 0..<10 {
            _ = await wakeups.typeStates(accountID: account, atLeast: newer) {
                reads.withLock { $0 += 1 }
                return try await server.typeStates(accountID: account)
            }
        }
        #expect(reads.withLock { $0 } == 2)
        for id in streams { wakeups.unsubscribe(id, accountID: account) }
        #expect(wakeups.count == 0)
    }
}
