import Foundation
import HTTPClient
import MailSync
import MailSyncHTTP
import TestSupport
import Testing

@Suite("HTTPMailTransport's event stream against a real HTTP server")
struct HTTPMailTransportChangeStreamTests {
    func makeTransport(_ baseURL: String) throws -> HTTPMailTransport {
        try HTTPMailTransport(
            baseURL: baseURL,
            client: HTTPClient(configuration: .init(httpVersion: .http1, requestTimeout: .seconds(10))))
    }

    func deliver(_ transport: HTTPMailTransport) async throws -> DeliveryReceipt {
        try await transport.deliver(
            OutgoingMessage(to: "alice", from: "bob@example.com", subject: "s", body: "b"),
            deliveryToken: "delivery-secret")
    }

    /// The next change the stream announces, skipping pings (up to 10 s).
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

    @Test("state events with their ids, pings, Last-Event-ID and the bearer token")
    func stateEvents() async throws {
        let backend = try FakeBackend.Process()
        let transport = try makeTransport(backend.baseURL)
        try await transport.login(username: "alice", password: "secret", deviceName: "test")
        let stream = try await transport.openChangeStream(lastEventID: nil, pingInterval: .seconds(1))
        var iterator = stream.makeAsyncIterator()
        var pings = 0
        let first = try await deliver(transport)
        #expect(try await nextChange(&iterator, pings: &pings) == first.state)
        let second = try await deliver(transport)
        #expect(try await nextChange(&iterator, pings: &pings) == second.state)
        // A quiet stream sends pings.
        try await Task.sleep(for: .milliseconds(1500))
        let third = try await deliver(transport)
        #expect(try await nextChange(&iterator, pings: &pings) == third.state)
        #expect(pings >= 1)

        // Reopened naming an older event, the stream announces the current state at once.
        let again = try await transport.openChangeStream(lastEventID: first.state, pingInterval: .seconds(5))
        var replay = again.makeAsyncIterator()
        #expect(try await nextChange(&replay, pings: &pings) == third.state)
        let opened = try backend.requests().filter { $0["path"] as? String == "/jmap/eventsource" }
        #expect(opened.count == 2)
        #expect(opened.allSatisfy { $0["authorized"] as? Bool == true })
        #expect(opened.map { $0["lastEventID"] as? String } == [nil, first.state])
        let query = opened.first?["query"] as? [String: String]
        #expect(query == ["types": "*", "closeafter": "no", "ping": "1"])
    }

    @Test("refusals map to typed errors: 401 without a session, 404 where there is no stream, 503 retryable")
    func refusals() async throws {
        let backend = try FakeBackend.Process()
        let transport = try makeTransport(backend.baseURL)
        await #expect(throws: MailSyncError.unauthorized) {
            _ = try await transport.openChangeStream(lastEventID: nil, pingInterval: .seconds(5))
        }
        try await transport.login(username: "alice", password: "secret", deviceName: "test")
        try backend.fault("/jmap/eventsource", status: 404, body: #"{"error":"notFound","message":"no such route"}"#)
        await #expect(throws: MailSyncError.notFound) {
            _ = try await transport.openChangeStream(lastEventID: nil, pingInterval: .seconds(5))
        }
        try backend.fault(
            "/jmap/eventsource", status: 503, body: #"{"error":"unavailable","message":"busy"}"#,
            headers: #"{"Retry-After":"2"}"#)
        await #expect(throws: MailSyncError.server(status: 503, code: "unavailable", retryAfter: .seconds(2))) {
            _ = try await transport.openChangeStream(lastEventID: nil, pingInterval: .seconds(5))
        }
        try backend.fault("/jmap/eventsource", status: 200, body: #"{"not":"a stream"}"#)
        await #expect(throws: MailSyncError.invalidResponse("the event stream is not text/event-stream")) {
            _ = try await transport.openChangeStream(lastEventID: nil, pingInterval: .seconds(5))
        }
        let dead = try makeTransport("http://127.0.0.1:\(freeLocalPort())")
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

    @Test("a stream the server drops ends the sequence with a network error or its end")
    func serverDrop() async throws {
        let backend = try FakeBackend.Process()
        let transport = try makeTransport(backend.baseURL)
        try await transport.login(username: "alice", password: "secret", deviceName: "test")
        let stream = try await transport.openChangeStream(lastEventID: nil, pingInterval: .seconds(1))
        backend.child.stop(signal: SIGKILL)
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
