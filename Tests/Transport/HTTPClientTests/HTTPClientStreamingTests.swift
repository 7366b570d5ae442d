import Foundation
import ServerSentEvents
import TestSupport
import Testing

@testable import HTTPClient

@Suite struct HTTPClientStreamingTests {
    @Test func chunksArriveBeforeTheResponseEnds() async throws {
        let server = try ServerProcess.echoServer()
        let client = HTTPClient(configuration: .init(httpVersion: .http1))
        defer { client.shutdown() }
        let base = "http://127.0.0.1:\(server.port)"

        let response = try await client.stream(HTTPClient.Request(url: "\(base)/gated"))
        #expect(response.status == 200)
        #expect(response.headers["content-type"] == "text/plain")
        var iterator = response.body.makeAsyncIterator()
        // The server holds the rest of the body until /release is requested, so this chunk came on its own.
        let first = try await iterator.next()
        #expect(first.map { String(decoding: $0, as: UTF8.self) } == "first\n")

        let release = try await client.execute(HTTPClient.Request(url: "\(base)/release"))
        #expect(release.status == 200)
        var rest = Data()
        while let chunk = try await iterator.next() { rest.append(chunk) }
        #expect(String(decoding: rest, as: UTF8.self) == "second\n")
    }

    @Test func serverSentEventsAreParsedFromTheStream() async throws {
        let server = try ServerProcess.echoServer()
        let client = HTTPClient(configuration: .init(httpVersion: .http1))
        defer { client.shutdown() }

        let response = try await client.stream(HTTPClient.Request(url: "http://127.0.0.1:\(server.port)/sse"))
        #expect(response.headers["Content-Type"] == "text/event-stream")
        var events: [ServerSentEvent] = []
        for try await event in response.body.serverSentEvents { events.append(event) }
        #expect(
            events == [
                ServerSentEvent(event: "greeting", data: "hello", id: "1"),
                ServerSentEvent(event: "message", data: "line one\nline two", id: "1"),
                ServerSentEvent(event: "done", data: "{\"n\": 2}", id: "2"),
            ])
    }

    @Test func cancellingTheReadingTaskAbortsTheTransfer() async throws {
        let server = try ServerProcess.echoServer()
        let client = HTTPClient(configuration: .init(httpVersion: .http1))
        defer { client.shutdown() }
        let base = "http://127.0.0.1:\(server.port)"

        let response = try await client.stream(HTTPClient.Request(url: "\(base)/sse-forever"))
        let (firstEvent, firstEventContinuation) = AsyncStream.makeStream(of: String.self)
        let reader = Task {
            for try await event in response.body.serverSentEvents {
                firstEventContinuation.yield(event.data)
            }
        }
        var firstEvents = firstEvent.makeAsyncIterator()
        #expect(await firstEvents.next() == "ready")
        reader.cancel()
        await #expect(throws: CancellationError.self) { try await reader.value }
        try await expectStreamsToClose(client: client, base: base)
    }

    @Test func explicitCancelAbortsTheTransfer() async throws {
        let server = try ServerProcess.echoServer()
        let client = HTTPClient(configuration: .init(httpVersion: .http1))
        defer { client.shutdown() }
        let base = "http://127.0.0.1:\(server.port)"

        let response = try await client.stream(HTTPClient.Request(url: "\(base)/sse-forever"))
        var events = response.body.serverSentEvents.makeAsyncIterator()
        #expect(try await events.next()?.data == "ready")
        response.cancel()
        await #expect(throws: CancellationError.self) {
            while try await events.next() != nil {}
        }
        try await expectStreamsToClose(client: client, base: base)
    }

    @Test func droppingTheResponseAbortsTheTransfer() async throws {
        let server = try ServerProcess.echoServer()
        let client = HTTPClient(configuration: .init(httpVersion: .http1))
        defer { client.shutdown() }
        let base = "http://127.0.0.1:\(server.port)"

        do {
            let response = try await client.stream(HTTPClient.Request(url: "\(base)/sse-forever"))
            #expect(response.status == 200)
        }
        try await expectStreamsToClose(client: client, base: base)
    }

    /// Waits until the echo server reports that it stopped writing every endless stream.
    private func expectStreamsToClose(client: HTTPClient, base: String) async throws {
        let closed = try await eventually { try await EchoStats.read(client, base: base).openStreams == 0 }
        #expect(closed, "the server still writes a stream the client gave up")
    }
}
