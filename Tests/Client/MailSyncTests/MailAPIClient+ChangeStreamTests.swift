import Foundation
import MailSync
import MailSyncHTTP
import TestSupport
import Testing

@Suite("MailAPIClient's event stream over libcurl and over URLSession against mailboxd in process")
struct MailAPIClientChangeStreamTests {
    func deliver(_ transport: MailAPIClient) async throws -> DeliveryReceipt {
        try await transport.deliver(
            OutgoingMessage(to: "alice", from: "bob@example.com", subject: "s", body: "b"),
            deliveryToken: InProcessMailboxd.deliveryToken)
    }

    /// The next change the stream announces, counting the pings before it.
    func nextChange(
        _ iterator: inout AsyncThrowingStream<ChangeNotice, any Error>.Iterator, pings: inout Int
    ) async throws -> String? {
        while let notice = try await iterator.next() {
            switch notice {
            case .changed(let state): return state
            case .ping: pings += 1
            }
        }
        return nil
    }

    /// Reads up to the stream's next ping; returns the changes announced before it.
    func changesBeforePing(
        _ iterator: inout AsyncThrowingStream<ChangeNotice, any Error>.Iterator, pings: inout Int
    ) async throws -> [String?] {
        var changes: [String?] = []
        while let notice = try await iterator.next() {
            switch notice {
            case .changed(let state): changes.append(state)
            case .ping:
                pings += 1
                return changes
            }
        }
        return changes
    }

    @Test("state events with their ids, pings, Last-Event-ID and the bearer token", arguments: Exchange.allCases)
    func stateEvents(exchange: Exchange) async throws {
        let backend = try await InProcessMailboxd()
        let transport = try exchange.client(backend.baseURL)
        try await transport.login(username: "alice", password: InProcessMailboxd.password, deviceName: "test")
        let stream = try await transport.openChangeStream(lastEventID: nil, pingInterval: .seconds(1))
        var iterator = stream.makeAsyncIterator()
        var pings = 0
        let first = try await deliver(transport)
        #expect(try await nextChange(&iterator, pings: &pings) == first.state)
        let second = try await deliver(transport)
        #expect(try await nextChange(&iterator, pings: &pings) == second.state)
        // A quiet stream sends pings (the server raises the interval asked for to at least 5 s).
        #expect(try await changesBeforePing(&iterator, pings: &pings) == [])
        #expect(pings >= 1, "the stream ended without a ping")
        let third = try await deliver(transport)
        #expect(try await nextChange(&iterator, pings: &pings) == third.state)

        // Reopened naming an older event, the stream announces the current state at once.
        let again = try await transport.openChangeStream(lastEventID: first.state, pingInterval: .seconds(5))
        var replay = again.makeAsyncIterator()
        #expect(try await nextChange(&replay, pings: &pings) == third.state)
        // The server answers 401 without the bearer token; both openings were accepted. Without Last-Event-ID the
        // first stream announced nothing before the first delivery; naming `first` the second announced at once.
        let anonymous = try exchange.client(backend.baseURL)
        await #expect(throws: MailSyncError.unauthorized) {
            _ = try await anonymous.openChangeStream(lastEventID: nil, pingInterval: .seconds(1))
        }
        // The access log has a stream once it ends: the service stops, ending both.
        await backend.stop()
        let opened = backend.requests.filter { $0.path == "/jmap/eventsource" }
        #expect(opened.count == 3)
        #expect(opened.filter { $0.method == "GET" && $0.status == 200 }.count == 2)
        #expect(opened.filter { $0.status == 401 }.count == 1)
    }

    @Test(
        "refusals map to typed errors: 401 without a session, 404 where there is no stream, 503 retryable",
        arguments: Exchange.allCases)
    func refusals(exchange: Exchange) async throws {
        let backend = try await InProcessMailboxd()
        let transport = try exchange.client(backend.baseURL)
        await #expect(throws: MailSyncError.unauthorized) {
            _ = try await transport.openChangeStream(lastEventID: nil, pingInterval: .seconds(5))
        }
        try await transport.login(username: "alice", password: InProcessMailboxd.password, deviceName: "test")
        // mailboxd's metrics listener serves no event stream.
        let metrics = try exchange.client(backend.metricsURL)
        metrics.accessToken = transport.accessToken
        await #expect(throws: MailSyncError.notFound) {
            _ = try await metrics.openChangeStream(lastEventID: nil, pingInterval: .seconds(5))
        }
        // The database cannot take a write (another connection holds its lock): 503 with Retry-After.
        try await backend.withWritesHeld {
            await #expect(
                throws: MailSyncError.server(status: 503, code: "storageUnavailable", retryAfter: .seconds(5))
            ) {
                _ = try await transport.openChangeStream(lastEventID: nil, pingInterval: .seconds(5))
            }
        }
        #expect(MailSyncError.server(status: 503, code: "storageUnavailable", retryAfter: .seconds(5)).isRetryable)
        // A 200 that is not an event stream (the server's health answer, reached through a base URL that turns the
        // stream's path into a query).
        let elsewhere = try exchange.client(backend.baseURL + "/healthz?path=")
        elsewhere.accessToken = transport.accessToken
        await #expect(throws: MailSyncError.invalidResponse("the event stream is not text/event-stream")) {
            _ = try await elsewhere.openChangeStream(lastEventID: nil, pingInterval: .seconds(5))
        }
        let dead = try exchange.client("http://127.0.0.1:\(freeLocalPort())")
        do {
            _ = try await dead.openChangeStream(lastEventID: nil, pingInterval: .seconds(5))
            Issue.record("expected a network error")
        } catch let error as MailSyncError {
            guard case .network = error else {
                Issue.record("expected .network, got \(error)")
                return
            }
        }
    }

    @Test("a stream the server drops ends the sequence with a network error or its end", arguments: Exchange.allCases)
    func serverDrop(exchange: Exchange) async throws {
        let backend = try await InProcessMailboxd()
        let transport = try exchange.client(backend.baseURL)
        try await transport.login(username: "alice", password: InProcessMailboxd.password, deviceName: "test")
        let stream = try await transport.openChangeStream(lastEventID: nil, pingInterval: .seconds(1))
        await backend.stop()
        do {
            for try await _ in stream {}
        } catch let error as MailSyncError {
            guard case .network = error else {
                Issue.record("expected .network, got \(error)")
                return
            }
        }
    }
}
