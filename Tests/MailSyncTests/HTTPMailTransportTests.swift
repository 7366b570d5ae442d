import Foundation
import HTTPClient
import MailSync
import MailSyncHTTP
import MailSyncSQLite
import OpenSSLCrypto
import TestSupport
import Testing

@Suite("HTTPMailTransport against a real HTTP server")
struct HTTPMailTransportTests {
    static let delivery = "delivery-secret"

    func makeTransport(_ baseURL: String, tls: TLSConfiguration = TLSConfiguration()) throws -> HTTPMailTransport {
        try HTTPMailTransport(
            baseURL: baseURL,
            client: HTTPClient(configuration: .init(httpVersion: .http1, tls: tls, requestTimeout: .seconds(10))))
    }

    func deliver(_ transport: HTTPMailTransport, _ count: Int, bodySize: Int = 10) async throws -> [DeliveryReceipt] {
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

    @Test("login, listing, changes, message, update and delete over plain HTTP")
    func happyPath() async throws {
        let backend = try FakeBackend.Process()
        let transport = try makeTransport(backend.baseURL + "/")
        let receipts = try await deliver(transport, 3)
        let large = try await deliver(transport, 1, bodySize: 20_000)[0]
        let session = try await transport.login(username: "alice", password: "secret", deviceName: "test")
        #expect(session.accountId == "acct-1" && transport.accessToken == session.accessToken)

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

        try await transport.registerDevice(token: String(repeating: "a", count: 64), topic: "t", environment: "sandbox")
        try await transport.logout()
        #expect(transport.accessToken == nil)
        let requests = try backend.requests()
        let changesRequest = try #require(requests.first { $0["path"] as? String == "/v1/changes" })
        #expect((changesRequest["query"] as? [String: String])?["max"] == "2")
        #expect(changesRequest["authorized"] as? Bool == true)
    }

    @Test("401, 400 cannotCalculateChanges, 400 invalidState, 503 with Retry-After and a dead port map to typed errors")
    func errorMapping() async throws {
        let backend = try FakeBackend.Process()
        let transport = try makeTransport(backend.baseURL)
        await #expect(throws: MailSyncError.server(status: 401, code: "invalidCredentials", retryAfter: nil)) {
            try await transport.login(username: "alice", password: "wrong", deviceName: "test")
        }
        let receipt = try await deliver(transport, 1)[0]
        try await transport.login(username: "alice", password: "secret", deviceName: "test")

        await #expect(throws: MailSyncError.invalidState) { try await transport.fetchChanges(since: "garbage", max: 5) }
        try backend.control("/test/compact")
        await #expect(throws: MailSyncError.cannotCalculateChanges) {
            try await transport.fetchChanges(since: "00000000000000aa-0", max: 5)
        }
        await #expect(throws: MailSyncError.cannotCalculateChanges) {
            try await transport.fetchChanges(since: "ffffffffffffffff-1", max: 5)
        }
        try backend.fault(
            "/v1/changes", status: 503, body: #"{"error":"unavailable","message":"busy"}"#,
            headers: #"{"Retry-After":"7"}"#)
        do {
            _ = try await transport.fetchChanges(since: receipt.state, max: 5)
            Issue.record("expected a 503")
        } catch let error as MailSyncError {
            #expect(error == .server(status: 503, code: "unavailable", retryAfter: .seconds(7)))
            #expect(error.isRetryable)
        }
        try backend.fault("/v1/messages", status: 500, body: "null")
        await #expect(throws: MailSyncError.server(status: 500, code: nil, retryAfter: nil)) {
            try await transport.fetchAllMessages(cursor: nil, limit: 5)
        }
        try backend.fault("/v1/changes", status: 200, body: #"{"unexpected":true}"#)
        await #expect(throws: MailSyncError.invalidResponse("malformed JSON in the changes response")) {
            try await transport.fetchChanges(since: receipt.state, max: 5)
        }
        #expect(try await transport.fetchChanges(since: receipt.state, max: 5).created.isEmpty)

        try backend.control("/test/revoke")
        await #expect(throws: MailSyncError.unauthorized) {
            try await transport.fetchChanges(since: receipt.state, max: 5)
        }

        let dead = try makeTransport("http://127.0.0.1:\(freeLocalPort())")
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

    @Test("the engine over HTTP and SQLite converges, resyncs fully after compaction and fetches large bodies")
    func engineOverHTTP() async throws {
        let backend = try FakeBackend.Process()
        let directory = try TemporaryDirectory()
        let transport = try makeTransport(backend.baseURL)
        _ = try await deliver(transport, 5)
        let large = try await deliver(transport, 1, bodySize: 40_000)[0]
        try await transport.login(username: "alice", password: "secret", deviceName: "test")
        let cache = try SQLiteMailCache(path: directory.path("cache.sqlite"))
        let engine = try SyncEngine(
            transport: transport, cache: cache, configuration: .init(changesPageSize: 2, listingPageSize: 4))
        #expect(await engine.sync(.launch).fullResync)
        let more = try await deliver(transport, 3)
        try backend.fault("/v1/changes", status: 503, times: 1)
        let delta = await engine.sync(.signal(state: more.last!.state))
        #expect(delta.outcome == .completed && delta.created == 3 && delta.pages == 2 && !delta.fullResync)
        try backend.control("/test/compact")
        _ = try await deliver(transport, 1)
        #expect(await engine.sync(.timer).outcome == .completed)
        let mailbox = try backend.mailbox()
        let cached = try cache.messages(in: nil).sorted { $0.id < $1.id }
        #expect(cached.map(\.id) == mailbox.messages.map { $0["id"] as? String ?? "" })
        #expect(try cache.state() == mailbox.state)
        #expect(try await engine.body(ofMessage: large.id).count == 40_000)
    }

    @Test("TLS with a dev CA and SPKI pinning")
    func tls() async throws {
        let authority = try DevCertificates.makeCertificateAuthority(commonName: "MailSync Test CA")
        let server = try DevCertificates.makeServerCertificate(hosts: ["127.0.0.1", "localhost"], signedBy: authority)
        let backend = try FakeBackend.Process(tls: (server.certificatePEM, server.privateKeyPEM))
        let caPath = backend.directory.path("ca.pem")
        try authority.certificatePEM.write(toFile: caPath, atomically: true, encoding: .utf8)
        let pin = try DevCertificates.spkiSHA256Base64(certificatePEM: server.certificatePEM)

        let trusted = try makeTransport(backend.baseURL, tls: TLSConfiguration(caFile: caPath, pinnedPublicKeys: [pin]))
        let session = try await trusted.login(username: "alice", password: "secret", deviceName: "tls")
        #expect(!session.accessToken.isEmpty)

        let untrusted = try makeTransport(backend.baseURL)
        await #expect(throws: MailSyncError.self) {
            try await untrusted.login(username: "alice", password: "secret", deviceName: "tls")
        }
        let wrongPin = try DevCertificates.spkiSHA256Base64(certificatePEM: authority.certificatePEM)
        let pinned = try makeTransport(
            backend.baseURL, tls: TLSConfiguration(caFile: caPath, pinnedPublicKeys: [wrongPin]))
        do {
            try await pinned.login(username: "alice", password: "secret", deviceName: "tls")
            Issue.record("a wrong pin must fail")
        } catch let error as MailSyncError {
            #expect(error.description.contains("pinned") || error.code == "network")
        }
    }
}
