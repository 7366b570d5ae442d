import Foundation
import IMAP
import MailboxHTTPAPI
import MailboxStore
import OpenSSLCrypto
import TestSupport
import Testing

@testable import MailboxService

/// The IMAP backend's side of commits: each one tells the connections watching the account, and the way it tells
/// them does not grow with the number of commits.
@Suite struct IMAPStoreBackendTests {
    @Test func aCommitTellsTheWatchingConnectionAtTheSameDepthAfterHundredsOfCommits() async throws {
        let (directory, store, accountID) = try await Self.storeWithAlice()
        defer { withExtendedLifetime(directory) {} }
        let backend = IMAPStoreBackend(store: store, signIn: SignInLimits())
        let (depths, told) = AsyncStream.makeStream(of: (connection: UInt64, frames: Int).self)
        backend.tell { connections in
            for connection in connections { told.yield((connection, Thread.callStackReturnAddresses.count)) }
        }
        backend.watch(account: accountID, connection: 7)

        // One commit at a time, each waited for until its connection is told.
        var frames: [Int] = []
        var arrivals = depths.makeAsyncIterator()
        for number in 0..<300 {
            _ = try await store.deliver(
                NewMessage(to: "alice", from: "erin@example.com", subject: "n\(number)", body: "b"))
            let arrival = try #require(await arrivals.next())
            #expect(arrival.connection == 7)
            frames.append(arrival.frames)
        }
        let first = try #require(frames.first)
        // Before the fix each commit added two frames (the cap of what `callStackReturnAddresses` shows is far below
        // 600); the same path from the same thread is told within a few frames of the first.
        #expect(
            frames.allSatisfy { $0 <= first + 8 }, "frames per notification: \(frames.prefix(5))…\(frames.suffix(5))")
        backend.unwatch(connection: 7)
        told.finish()
    }

    /// A mailbox selected again is brought up to date from what changed since (a delta), not read whole: after
    /// deliveries, flag changes, a move out, a move back in under a new UID and a destruction, it is what a backend
    /// that never saw it reads, counts included.
    @Test func aMailboxSelectedAgainIsWhatAFreshReadGives() async throws {
        let (directory, store, account) = try await Self.storeWithAlice()
        defer { withExtendedLifetime(directory) {} }
        var ids: [String] = []
        for number in 0..<20 {
            ids.append(
                try await store.deliver(
                    NewMessage(to: "alice", from: "erin@example.com", subject: "n\(number)", body: "b")
                ).id)
        }
        let kept = IMAPStoreBackend(store: store, signIn: SignInLimits())
        let first = try await Self.snapshot(kept, account, "INBOX")
        #expect(first.messages.count == 20)

        _ = try await store.updateMessage(id: ids[1], accountID: account, seen: true, flagged: nil, mailbox: nil)
        _ = try await store.updateMessage(id: ids[2], accountID: account, seen: nil, flagged: true, mailbox: nil)
        _ = try await store.updateMessage(id: ids[3], accountID: account, seen: nil, flagged: nil, mailbox: .archive)
        _ = try await store.updateMessage(id: ids[4], accountID: account, seen: nil, flagged: nil, mailbox: .archive)
        _ = try await store.updateMessage(id: ids[4], accountID: account, seen: nil, flagged: nil, mailbox: .inbox)
        _ = try await store.destroyMessage(id: ids[5], accountID: account)
        _ = try await store.deliver(NewMessage(to: "alice", from: "erin@example.com", subject: "late", body: "b"))

        let again = try await Self.snapshot(kept, account, "inbox")
        let fresh = try await Self.snapshot(IMAPStoreBackend(store: store, signIn: SignInLimits()), account, "INBOX")
        #expect(again == fresh)
        #expect(kept.wholeReads.withLock { $0 } == 1, "the second SELECT read a delta, not the whole mailbox")
        #expect(again.messages.count == 19 && again.info.messages == 19 && again.info.unseen == 18)
        #expect(again.messages.dropLast().last?.id == ids[4], "a message moved back in comes after those that stayed")
        #expect(again.highestModseq > first.highestModseq)
    }

    /// Connections woken by one commit ask for the same delta; those that ask after the read finished take its kept
    /// answer without reading again, until the account's next commit, after which a fresh read says what it changed.
    @Test func aFinishedDeltaIsKeptUntilTheAccountsNextCommit() async throws {
        let (directory, store, account) = try await Self.storeWithAlice()
        defer { withExtendedLifetime(directory) {} }
        let backend = IMAPStoreBackend(store: store, signIn: SignInLimits())
        let (commits, seen) = AsyncStream.makeStream(of: UInt64.self)
        backend.tell { connections in
            for connection in connections { seen.yield(connection) }
        }
        backend.watch(account: account, connection: 1)
        var told = commits.makeAsyncIterator()
        let since = try await Self.snapshot(backend, account, "INBOX").highestModseq

        _ = try await store.deliver(NewMessage(to: "alice", from: "erin@example.com", subject: "one", body: "b"))
        _ = await told.next()
        let first = try await Self.delta(backend, account, since)
        let again = try await Self.delta(backend, account, since)
        #expect(first?.changed.count == 1 && again == first)
        #expect(backend.deltaStoreReads.withLock { $0 } == 1)

        _ = try await store.deliver(NewMessage(to: "alice", from: "erin@example.com", subject: "two", body: "b"))
        _ = await told.next()
        let after = try await Self.delta(backend, account, since)
        #expect(after?.changed.count == 2, "the next commit is not answered from the kept delta")
        #expect(backend.deltaStoreReads.withLock { $0 } == 2)
        seen.finish()
    }

    /// A store in a new folder (kept while the folder lives) with one account, alice.
    static func storeWithAlice() async throws -> (TemporaryDirectory, MailboxStore, Int64) {
        let directory = try TemporaryDirectory(prefix: "imap-backend")
        var configuration = MailboxStore.Configuration()
        configuration.passwordParameters = .testing
        let store = try MailboxStore(
            database: .sqlite(path: directory.path("mailbox.sqlite")), configuration: configuration)
        let account = try await store.createAccount(username: "alice", password: "password-alice").id
        return (directory, store, account)
    }

    static func delta(
        _ backend: IMAPStoreBackend, _ account: Int64, _ since: Int64
    ) async throws -> IMAPMailboxDelta? {
        try await withCheckedThrowingContinuation { continuation in
            backend.delta(account: account, mailbox: "INBOX", since: since) { continuation.resume(with: $0) }
        }
    }

    static func snapshot(
        _ backend: IMAPStoreBackend, _ account: Int64, _ mailbox: String
    ) async throws -> IMAPMailboxSnapshot {
        try await withCheckedThrowingContinuation { continuation in
            backend.snapshot(account: account, mailbox: mailbox) { continuation.resume(with: $0) }
        }
    }
}
