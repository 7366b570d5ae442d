import Foundation
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
        let directory = try TemporaryDirectory(prefix: "imap-backend")
        var configuration = MailboxStore.Configuration()
        configuration.passwordParameters = .testing
        let store = try MailboxStore(
            database: .sqlite(path: directory.path("mailbox.sqlite")), configuration: configuration)
        let account = try await store.createAccount(username: "alice", password: "password-alice")
        let backend = IMAPStoreBackend(store: store, signIn: SignInLimits())
        let (depths, told) = AsyncStream.makeStream(of: (connection: UInt64, frames: Int).self)
        backend.tell { connection in told.yield((connection, Thread.callStackReturnAddresses.count)) }
        backend.watch(account: account.id, connection: 7)

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
}
