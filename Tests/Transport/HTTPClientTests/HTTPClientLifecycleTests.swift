import Foundation
import TestSupport
import Testing

@testable import HTTPClient

@Suite struct HTTPClientLifecycleTests {
    @Test func refusedConnectionIsConnectionFailed() async throws {
        let client = HTTPClient()
        defer { client.shutdown() }
        let port = freeLocalPort()
        let error = await #expect(throws: HTTPClientError.self) {
            try await client.execute(HTTPClient.Request(url: "http://127.0.0.1:\(port)/"))
        }
        guard case .connectionFailed(let message) = error else {
            Issue.record("expected connectionFailed, got \(String(describing: error))")
            return
        }
        #expect(!message.isEmpty)
    }

    @Test func totalTimeoutFires() async throws {
        let server = try ServerProcess.echoServer()
        let client = HTTPClient(configuration: .init(httpVersion: .http1, requestTimeout: .milliseconds(200)))
        defer { client.shutdown() }
        let base = "http://127.0.0.1:\(server.port)"
        await #expect(throws: HTTPClientError.timeout) {
            try await client.execute(HTTPClient.Request(url: "\(base)/delay?ms=5000"))
        }
        // The per-request value overrides the configured one.
        await #expect(throws: HTTPClientError.timeout) {
            try await client.execute(HTTPClient.Request(url: "\(base)/delay?ms=5000", timeout: .milliseconds(100)))
        }
        let patient = try await client.execute(HTTPClient.Request(url: "\(base)/delay?ms=50", timeout: .seconds(30)))
        #expect(String(decoding: patient.body, as: UTF8.self) == "delayed")
    }

    @Test func cancellingTheTaskThrowsCancellationError() async throws {
        let server = try ServerProcess.echoServer()
        let client = HTTPClient(configuration: .init(httpVersion: .http1))
        defer { client.shutdown() }
        let base = "http://127.0.0.1:\(server.port)"
        let url = "\(base)/delay?ms=10000"

        let inFlight = Task { try await client.execute(HTTPClient.Request(url: url)) }
        #expect(try await eventually { try await EchoStats.read(client, base: base).delaying == 1 })
        inFlight.cancel()
        await #expect(throws: CancellationError.self) { try await inFlight.value }

        let alreadyCancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await client.execute(HTTPClient.Request(url: url))
        }
        await #expect(throws: CancellationError.self) { try await alreadyCancelled.value }

        // The client keeps working afterwards.
        let response = try await client.execute(HTTPClient.Request(url: "http://127.0.0.1:\(server.port)/echo"))
        #expect(response.status == 200)
    }

    @Test func shutdownFailsPendingAndLaterRequests() async throws {
        let server = try ServerProcess.echoServer()
        let client = HTTPClient(configuration: .init(httpVersion: .http1))
        let base = "http://127.0.0.1:\(server.port)"
        let url = "\(base)/delay?ms=10000"

        let pending = Task { try await client.execute(HTTPClient.Request(url: url)) }
        #expect(try await eventually { try await EchoStats.read(client, base: base).delaying == 1 })
        client.shutdown()
        client.shutdown()
        await #expect(throws: HTTPClientError.shutdown) { try await pending.value }
        await #expect(throws: HTTPClientError.shutdown) {
            try await client.execute(HTTPClient.Request(url: "http://127.0.0.1:\(server.port)/echo"))
        }
    }

    @Test func releasingTheClientStopsIt() async throws {
        let server = try ServerProcess.echoServer()
        var client: HTTPClient? = HTTPClient(configuration: .init(httpVersion: .http1))
        let response = try await client?.execute(HTTPClient.Request(url: "http://127.0.0.1:\(server.port)/echo"))
        #expect(response?.status == 200)
        weak let released = client
        client = nil
        #expect(released == nil)
    }

    @Test func oversizedBufferedBodyFails() async throws {
        let server = try ServerProcess.echoServer()
        let client = HTTPClient(configuration: .init(httpVersion: .http1, maximumResponseBodySize: 16))
        defer { client.shutdown() }
        await #expect(throws: HTTPClientError.responseTooLarge(limit: 16)) {
            try await client.execute(HTTPClient.Request(url: "http://127.0.0.1:\(server.port)/echo"))
        }
    }
}
