import Foundation
import MailSync
import MailSyncSQLite
import SQLiteKit
import TestSupport
import Testing

@Suite("SQLiteMailCache")
struct SQLiteMailCacheTests {
    func message(_ id: String, body: String? = "body", seen: Bool = false, size: Int = 4) -> MailMessage {
        MailMessage(
            id: id, from: "a@example.com", to: [MailAddress(address: "alice")], subject: "s-\(id)", preview: "p",
            size: size,
            receivedAt: 1_700_000_000, seen: seen, body: body)
    }

    @Test("applies pages, reopens with the same contents and state")
    func applyAndReopen() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("cache.sqlite")
        do {
            let cache = try SQLiteMailCache(path: path)
            #expect(try cache.state() == nil)
            let counts = try cache.apply(
                MessageChanges(oldState: "", newState: "s1", created: [message("a"), message("b"), message("c")]))
            #expect(counts == ChangeCounts(created: 3))
            let second = try cache.apply(
                MessageChanges(
                    oldState: "s1", newState: "s2", updated: [message("a", body: nil, seen: true)],
                    destroyed: ["b", "zz"]))
            #expect(second == ChangeCounts(updated: 1, destroyed: 1))
        }
        let reopened = try SQLiteMailCache(path: path)
        #expect(try reopened.state() == "s2")
        #expect(try reopened.messageCount() == 2)
        let a = try #require(try reopened.message(id: "a"))
        #expect(a.seen && a.body == "body")  // an update without a body keeps the cached one
        #expect(try reopened.integrityCheck() == "ok")
    }

    @Test("a failure in the middle of a page leaves the cache at the previous state")
    func pageIsAtomic() throws {
        let directory = try TemporaryDirectory()
        let cache = try SQLiteMailCache(path: directory.path("cache.sqlite"))
        try cache.apply(MessageChanges(oldState: "", newState: "s1", created: [message("a"), message("b")]))
        let bad = MessageChanges(
            oldState: "s1", newState: "s2", created: [message("c"), message("d", size: -1)],
            updated: [message("a", seen: true)], destroyed: ["b"])
        #expect(throws: SQLiteError.self) { try cache.apply(bad) }
        #expect(try cache.state() == "s1")
        #expect(try cache.messages(in: nil).map(\.id).sorted() == ["a", "b"])
        #expect(try cache.message(id: "a")?.seen == false)
        #expect(throws: SQLiteError.self) {
            try cache.replaceAll(with: [message("x"), message("")], state: "s9")
        }
        #expect(try cache.state() == "s1" && cache.messageCount() == 2)
    }

    @Test("a full resync replaces the contents, keeps fetched bodies and counts the difference")
    func replaceAll() throws {
        let cache = try SQLiteMailCache(path: ":memory:")
        try cache.apply(
            MessageChanges(
                oldState: "", newState: "s1", created: [message("a"), message("b", body: nil, size: 20_000)]))
        try cache.storeBody("large body", forMessageID: "b")
        let counts = try cache.replaceAll(
            with: [message("b", body: nil, seen: true, size: 20_000), message("c")], state: "s5")
        #expect(counts == ChangeCounts(created: 1, updated: 1, destroyed: 1))
        #expect(try cache.state() == "s5")
        #expect(try cache.message(id: "b")?.body == "large body")
        #expect(try cache.message(id: "a") == nil)
    }

    @Test("messages are listed newest first and by mailbox; local upserts and removals keep the state")
    func listing() throws {
        let cache = try SQLiteMailCache(path: ":memory:")
        var old = message("old")
        old.receivedAt = 1
        var archived = message("arch")
        archived.mailbox = .archive
        archived.receivedAt = 5
        try cache.apply(MessageChanges(oldState: "", newState: "s1", created: [old, message("new"), archived]))
        #expect(try cache.messages(in: nil).map(\.id) == ["new", "arch", "old"])
        #expect(try cache.messages(in: .archive).map(\.id) == ["arch"])
        try cache.upsert(message("new", body: nil, seen: true))
        try cache.remove(messageID: "old")
        #expect(try cache.state() == "s1" && cache.messageCount() == 2)
        #expect(try cache.message(id: "new")?.body == "body")
    }

    @Test("binding to another account empties the cache")
    func accountBinding() throws {
        let cache = try SQLiteMailCache(path: ":memory:")
        #expect(try cache.bind(toAccount: "1") == false)
        try cache.apply(MessageChanges(oldState: "", newState: "s1", created: [message("a")]))
        #expect(try cache.bind(toAccount: "1") == false)
        #expect(try cache.messageCount() == 1)
        #expect(try cache.bind(toAccount: "2") == true)
        #expect(try cache.messageCount() == 0 && cache.state() == nil && cache.accountID() == "2")
    }

    @Test("the engine converges on a SQLite cache and resumes after reopening")
    func engineOnSQLite() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("cache.sqlite")
        let server = FakeMailServer()
        for _ in 0..<10 { server.deliver() }
        do {
            let engine = try SyncEngine(transport: server, cache: try SQLiteMailCache(path: path))
            #expect(await engine.sync(.launch).fullResync)
        }
        server.destroy(server.mailbox[3].id)
        server.deliver(bodySize: 30_000)
        let cache = try SQLiteMailCache(path: path)
        let engine = try SyncEngine(
            transport: server, cache: cache, configuration: .init(changesPageSize: 1, retryPolicy: quickRetries))
        let report = await engine.sync(.signal(state: server.currentState))
        #expect(!report.fullResync && report.pages == 2)
        #expect(syncedView(try cache.messages(in: nil)) == syncedView(server.mailbox))
    }
}
