import Foundation
import HTTPClient
import MailSync
import MailSyncHTTP
import MailSyncSQLite
import MailSyncURLSession
import OpenSSLCrypto
import TestSupport
import Testing

/// The HTTP stacks MailSync runs over: each test of the API client runs over both, against the same server.
enum Exchange: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// libcurl (`MailSyncHTTP`): the simulated devices' default.
    case curl
    /// `URLSession` (`MailSyncURLSession`): what an app ships.
    case urlsession

    var testDescription: String { rawValue }

    /// A client of the server at `baseURL` over this stack (for curl, with `tls`).
    func client(_ baseURL: String, tls: TLSConfiguration = TLSConfiguration()) throws -> MailAPIClient {
        switch self {
        case .curl:
            try MailAPIClient(
                baseURL: baseURL,
                client: HTTPClient(configuration: .init(httpVersion: .http1, tls: tls, requestTimeout: .seconds(10))))
        case .urlsession: MailAPIClient(exchange: try URLSessionMailExchange(baseURL: baseURL, timeout: 10))
        }
    }
}

@Suite("MailAPIClient over libcurl and over URLSession against mailboxd in process")
struct MailAPIClientTests {
    static let delivery = InProcessMailboxd.deliveryToken

    func deliver(_ transport: MailAPIClient, _ count: Int, bodySize: Int = 10) async throws -> [DeliveryReceipt] {
        var receipts: [DeliveryReceipt] = []
        for index in 0..<count {
            receipts.append(
                try await transport.deliver(
                    OutgoingMessage(
                        to: "alice", from: "bob@example.com", subject: "subject \(index)",
                        body: String(repeating: "x", count: bodySize)),
                    deliveryToken: Self.delivery))
        }
        return receipts
    }

    @Test("login, listing, changes, message, update and delete over plain HTTP", arguments: Exchange.allCases)
    func happyPath(exchange: Exchange) async throws {
        let backend = try await InProcessMailboxd()
        let transport = try exchange.client(backend.baseURL + "/")
        let receipts = try await deliver(transport, 3)
        let large = try await deliver(transport, 1, bodySize: 20_000)[0]
        let session = try await transport.login(
            username: "alice", password: InProcessMailboxd.password, deviceName: "test")
        #expect(session.accountId == String(backend.accountID) && transport.accessToken == session.accessToken)

        let first = try await transport.fetchAllMessages(cursor: nil, limit: 3)
        #expect(first.messages.count == 3 && first.nextCursor != nil && first.state == large.state)
        let second = try await transport.fetchAllMessages(cursor: first.nextCursor, limit: 3)
        #expect(second.messages.map(\.id) == [large.id] && second.nextCursor == nil)
        #expect(second.messages[0].body == nil && second.messages[0].size == 20_000)
        #expect(first.messages[0].body == "xxxxxxxxxx" && first.messages[0].subject == "subject 0")

        let changes = try await transport.fetchChanges(since: receipts[0].state, max: 2)
        #expect(changes.oldState == receipts[0].state && changes.hasMore)
        #expect(changes.created.map(\.id) == [receipts[1].id, receipts[2].id])
        let rest = try await transport.fetchChanges(since: changes.newState, max: 2)
        #expect(!rest.hasMore && rest.newState == large.state && rest.created.map(\.id) == [large.id])

        let full = try await transport.fetchMessage(id: large.id)
        #expect(full.body?.count == 20_000)
        let updated = try await transport.updateMessage(
            id: receipts[0].id, MessageUpdate(seen: true, mailbox: .archive))
        #expect(updated.seen && updated.mailbox == .archive)
        try await transport.deleteMessage(id: receipts[1].id)
        let after = try await transport.fetchChanges(since: large.state, max: 10)
        #expect(after.updated.map(\.id) == [receipts[0].id] && after.destroyed == [receipts[1].id])
        await #expect(throws: MailSyncError.notFound) { try await transport.fetchMessage(id: receipts[1].id) }

        try await transport.registerDevice(
            token: String(repeating: "a", count: 64), topic: InProcessMailboxd.topic, environment: "sandbox")
        try await transport.logout()
        #expect(transport.accessToken == nil)
        // The server answered every changes call (each needs the bearer token); `max=2` is what cut the first page
        // after two messages with `hasMore` (the server's default page is 500).
        let changesRequests = backend.requests.filter { $0.path == "/v1/changes" }
        #expect(changesRequests.count == 3 && changesRequests.allSatisfy { $0.status == 200 })
        await #expect(throws: MailSyncError.unauthorized) {
            try await transport.fetchChanges(since: large.state, max: 2)
        }
    }

    @Test(
        "401, 400 cannotCalculateChanges, 400 invalidState, 503 with Retry-After and a dead port map to typed errors",
        arguments: Exchange.allCases)
    func errorMapping(exchange: Exchange) async throws {
        let backend = try await InProcessMailboxd()
        let transport = try exchange.client(backend.baseURL)
        await #expect(throws: MailSyncError.server(status: 401, code: "invalidCredentials", retryAfter: nil)) {
            try await transport.login(username: "alice", password: "wrong", deviceName: "test")
        }
        // Compaction: a message came and went and its tombstone was discarded, so states before it are too old.
        try await backend.discardTombstones()
        let receipt = try await deliver(transport, 1)[0]
        try await transport.login(username: "alice", password: InProcessMailboxd.password, deviceName: "test")

        await #expect(throws: MailSyncError.invalidState) { try await transport.fetchChanges(since: "garbage", max: 5) }
        await #expect(throws: MailSyncError.cannotCalculateChanges) {
            try await transport.fetchChanges(since: "\(backend.store.epoch)-0", max: 5)
        }
        let foreignEpoch = backend.store.epoch == "ffffffffffffffff" ? "eeeeeeeeeeeeeeee" : "ffffffffffffffff"
        await #expect(throws: MailSyncError.cannotCalculateChanges) {
            try await transport.fetchChanges(since: "\(foreignEpoch)-1", max: 5)
        }
        // The database cannot take a write (another connection holds its lock): 503 with Retry-After.
        try await backend.withWritesHeld {
            do {
                _ = try await transport.fetchChanges(since: receipt.state, max: 5)
                Issue.record("expected a 503")
            } catch let error as MailSyncError {
                #expect(error == .server(status: 503, code: "storageUnavailable", retryAfter: .seconds(5)))
                #expect(error.isRetryable)
            }
        }
        // The database fails the read: 500 with the server's code.
        try await backend.withMessagesTableAside {
            await #expect(throws: MailSyncError.server(status: 500, code: "internalError", retryAfter: nil)) {
                try await transport.fetchAllMessages(cursor: nil, limit: 5)
            }
        }
        // A 200 whose JSON is not a changes response (the server's health answer, reached through a base URL that
        // turns the changes path into a query).
        let elsewhere = try exchange.client(backend.baseURL + "/healthz?path=")
        elsewhere.accessToken = transport.accessToken
        await #expect(throws: MailSyncError.invalidResponse("malformed JSON in the changes response")) {
            try await elsewhere.fetchChanges(since: receipt.state, max: 5)
        }
        #expect(try await transport.fetchChanges(since: receipt.state, max: 5).created.isEmpty)

        try await backend.revokeSession(accessToken: try #require(transport.accessToken))
        await #expect(throws: MailSyncError.unauthorized) {
            try await transport.fetchChanges(since: receipt.state, max: 5)
        }

        let dead = try exchange.client("http://127.0.0.1:\(freeLocalPort())")
        do {
            _ = try await dead.fetchChanges(since: receipt.state, max: 5)
            Issue.record("expected a network error")
        } catch let error as MailSyncError {
            guard case .network = error else {
                Issue.record("expected .network, got \(error)")
                return
            }
        }
    }

    @Test(
        "the engine over HTTP and SQLite converges, resyncs fully after compaction and fetches large bodies",
        arguments: Exchange.allCases)
    func engineOverHTTP(exchange: Exchange) async throws {
        let backend = try await InProcessMailboxd()
        let directory = try TemporaryDirectory()
        let transport = try exchange.client(backend.baseURL)
        _ = try await deliver(transport, 5)
        let large = try await deliver(transport, 1, bodySize: 40_000)[0]
        try await transport.login(username: "alice", password: InProcessMailboxd.password, deviceName: "test")
        let cache = try SQLiteMailCache(path: directory.path("cache.sqlite"))
        let engine = try SyncEngine(
            transport: transport, cache: cache, configuration: .init(changesPageSize: 2, listingPageSize: 4))
        #expect(await engine.sync(.launch).fullResync)
        let more = try await deliver(transport, 3)
        // The first changes call meets a database that cannot take a write (503): the engine retries.
        let sync = try await backend.withWritesHeld {
            let sync = Task { await engine.sync(.signal(state: more.last!.state)) }
            #expect(await backend.waitForRequest { $0.path == "/v1/changes" && $0.status == 503 })
            return sync
        }
        let delta = await sync.value
        #expect(delta.outcome == .completed && delta.created == 3 && delta.pages == 2 && !delta.fullResync)
        try await backend.discardTombstones()
        _ = try await deliver(transport, 1)
        let timer = await engine.sync(.timer)
        #expect(timer.outcome == .completed && timer.fullResync)
        let mailbox = try await backend.mailbox()
        let cached = try cache.messages(in: nil).sorted { $0.id < $1.id }
        #expect(cached.map(\.id) == mailbox.messageIDs)
        #expect(try cache.state() == mailbox.state)
        #expect(try await engine.body(ofMessage: large.id).count == 40_000)
    }

    @Test("libcurl: TLS with a dev CA and SPKI pinning")
    func tls() async throws {
        let authority = try DevCertificates.makeCertificateAuthority(commonName: "MailSync Test CA")
        let server = try DevCertificates.makeServerCertificate(hosts: ["127.0.0.1", "localhost"], signedBy: authority)
        let backend = try await InProcessMailboxd(tls: (server.certificatePEM, server.privateKeyPEM))
        let caPath = backend.directory.path("ca.pem")
        try authority.certificatePEM.write(toFile: caPath, atomically: true, encoding: .utf8)
        let pin = try DevCertificates.spkiSHA256Base64(certificatePEM: server.certificatePEM)

        let trusted = try Exchange.curl.client(
            backend.baseURL, tls: TLSConfiguration(caFile: caPath, pinnedPublicKeys: [pin]))
        let session = try await trusted.login(
            username: "alice", password: InProcessMailboxd.password, deviceName: "tls")
        #expect(!session.accessToken.isEmpty)

        let untrusted = try Exchange.curl.client(backend.baseURL)
        await #expect(throws: MailSyncError.self) {
            try await untrusted.login(username: "alice", password: InProcessMailboxd.password, deviceName: "tls")
        }
        let wrongPin = try DevCertificates.spkiSHA256Base64(certificatePEM: authority.certificatePEM)
        let pinned = try Exchange.curl.client(
            backend.baseURL, tls: TLSConfiguration(caFile: caPath, pinnedPublicKeys: [wrongPin]))
        do {
            try await pinned.login(username: "alice", password: InProcessMailboxd.password, deviceName: "tls")
            Issue.record("a wrong pin must fail")
        } catch let error as MailSyncError {
            #expect(error.description.contains("pinned") || error.code == "network")
        }
    }

    /// On Linux URLSession trusts the system store only: a server whose CA is not there is refused, as a network
    /// error that names TLS rather than the URL (the positive case runs mail-client with the CA in a private mount
    /// namespace's system store: `MailClientTests`).
    @Test("URLSession: a server signed by a CA outside the system store is refused")
    func urlSessionRefusesAnUntrustedServer() async throws {
        let authority = try DevCertificates.makeCertificateAuthority(commonName: "MailSync Test CA")
        let server = try DevCertificates.makeServerCertificate(hosts: ["127.0.0.1", "localhost"], signedBy: authority)
        let backend = try await InProcessMailboxd(tls: (server.certificatePEM, server.privateKeyPEM))
        let untrusted = try Exchange.urlsession.client(backend.baseURL)
        do {
            try await untrusted.login(username: "alice", password: InProcessMailboxd.password, deviceName: "tls")
            Issue.record("a server the system store does not trust must be refused")
        } catch let error as MailSyncError {
            guard case .network(let reason) = error else {
                Issue.record("expected .network, got \(error)")
                return
            }
            #expect(!reason.contains("127.0.0.1"), "the error names no URL: \(reason)")
        }
        #expect(backend.requests.isEmpty, "no request reached the API")
    }

    /// A server that promises a body and closes before sending it: a network error, never a partial answer.
    @Test("a response cut short by the server is a network error", arguments: Exchange.allCases)
    func aResponseCutShortIsANetworkError(exchange: Exchange) async throws {
        let server = try OneShotHTTPServer(
            response: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{\"created\": ["
        )
        let transport = try exchange.client("http://127.0.0.1:\(server.port)")
        do {
            _ = try await transport.fetchChanges(since: "0-0", max: 5)
            Issue.record("expected a network error")
        } catch let error as MailSyncError {
            guard case .network = error else {
                Issue.record("expected .network, got \(error)")
                return
            }
        }
        #expect(server.waitForRequest().hasPrefix("GET /v1/changes?since=0-0&max=5 HTTP/1.1"))
    }
}
