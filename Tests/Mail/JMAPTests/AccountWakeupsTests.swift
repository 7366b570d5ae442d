import Foundation
import JMAP
import Locking
import MailboxStore
import Testing

/// The fan-out of a commit to an account's streams and sockets: each subscriber is woken once with the new states,
/// and they are read once for all of them.
@Suite struct AccountWakeupsTests {
    /// A read of the account's states that counts itself, and lets the test hold it until it says.
    private final class CountingReads: Sendable {
        let server: JMAPServer
        let reads = LockedValue(0)
        /// While set, a read waits for it to be let go.
        let gate = LockedValue<AsyncStream<Void>.Continuation?>(nil)
        let (started, startedSink) = AsyncStream.makeStream(of: Int.self)

        init(server: JMAPServer) { self.server = server }

        func read(_ accountID: Int64) async throws -> TypeStates {
            let (held, release) = AsyncStream.makeStream(of: Void.self)
            let number = reads.withLock { count in
                count += 1
                return count
            }
            let holding = gate.withLock { gate -> Bool in
                guard gate != nil else { return false }
                gate = release
                return true
            }
            startedSink.yield(number)
            if holding {
                for await _ in held { break }
            }
            return try await server.typeStates(accountID: accountID)
        }
    }

    @Test("a commit wakes each of 1,000 subscribers of one account once, all with the states of one read")
    func oneReadForEverySubscriberOfAnAccount() async throws {
        let fixture = try await JMAPFixture(.sqlite)
        let reads = CountingReads(server: fixture.server)
        let wakeups = AccountWakeups(store: fixture.store) { try await reads.read($0) }
        let account = fixture.alice.id
        // Every subscriber's wake-ups, in one stream the test reads.
        let (woken, wake) = AsyncStream.makeStream(of: AccountWakeups.Wakeup.self)
        let subscriptions = (0..<1_000).map { _ in wakeups.subscribe(accountID: account) { wake.yield($0) } }
        try await fixture.deliver(to: fixture.alice)
        var wakeupsSeen: [AccountWakeups.Wakeup] = []
        for await wakeup in woken.prefix(subscriptions.count) { wakeupsSeen.append(wakeup) }
        let current = try await fixture.server.typeStates(accountID: account)
        #expect(wakeupsSeen.count == 1_000)
        #expect(wakeupsSeen.allSatisfy { $0 == .states(current, afterMiss: false) })
        #expect(reads.reads.withLock { $0 } == 1)
        for id in subscriptions { wakeups.unsubscribe(id, accountID: account) }
        #expect(wakeups.count == 0)
    }

    @Test("commits made while a read is in flight are read once after it, and the last wake-up has their states")
    func commitsDuringAReadShareTheNextRead() async throws {
        let fixture = try await JMAPFixture(.sqlite)
        let reads = CountingReads(server: fixture.server)
        reads.gate.withLock { $0 = AsyncStream.makeStream(of: Void.self).continuation }
        let wakeups = AccountWakeups(store: fixture.store) { try await reads.read($0) }
        let account = fixture.alice.id
        let (woken, wake) = AsyncStream.makeStream(of: AccountWakeups.Wakeup.self)
        let subscription = wakeups.subscribe(accountID: account) { wake.yield($0) }
        var started = reads.started.makeAsyncIterator()

        try await fixture.deliver(to: fixture.alice)
        #expect(await started.next() == 1)  // the first read is held
        for _ in 0..<3 { try await fixture.deliver(to: fixture.alice) }
        reads.gate.withLock { gate in
            gate?.yield()
            gate = nil  // the next read goes through
        }
        #expect(await started.next() == 2)
        var iterator = woken.makeAsyncIterator()
        _ = await iterator.next()
        let last = await iterator.next()
        let current = try await fixture.server.typeStates(accountID: account)
        #expect(last == .states(current, afterMiss: false))
        #expect(reads.reads.withLock { $0 } == 2)
        wakeups.unsubscribe(subscription, accountID: account)
    }

    @Test("an account without subscribers is not read, and a read that fails wakes its subscribers with .unread")
    func noReadWithoutSubscribersAndAFailedReadSaysSo() async throws {
        let fixture = try await JMAPFixture(.sqlite)
        struct ReadFailed: Error {}
        let reads = LockedValue(0)
        let wakeups = AccountWakeups(store: fixture.store) { _ in
            reads.withLock { $0 += 1 }
            throw ReadFailed()
        }
        let (woken, wake) = AsyncStream.makeStream(of: AccountWakeups.Wakeup.self)
        let subscription = wakeups.subscribe(accountID: fixture.alice.id) { wake.yield($0) }
        try await fixture.deliver(to: fixture.bob)  // nobody listens to bob
        try await fixture.deliver(to: fixture.alice)
        var iterator = woken.makeAsyncIterator()
        #expect(await iterator.next() == .unread)
        #expect(reads.withLock { $0 } == 1)
        wakeups.unsubscribe(subscription, accountID: fixture.alice.id)
    }
}
