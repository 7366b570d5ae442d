import Foundation
import TestSupport
import Testing

@testable import HTTPClient

@Suite struct HTTPClientHTTP1Tests {
    @Test func getAndPostAreEchoed() async throws {
        let server = try ServerProcess.echoServer()
        let client = HTTPClient(configuration: .init(httpVersion: .http1))
        defer { client.shutdown() }
        let base = "http://127.0.0.1:\(server.port)"

        let get = try await client.execute(
            HTTPClient.Request(url: "\(base)/echo?x=1", headers: ["X-Custom": "one", "x-custom": "two"]))
        #expect(get.status == 200)
        #expect(get.version == .http1_1)
        #expect(get.headers["content-type"] == "application/json")
        #expect(get.headers["X-ECHO-SERVER"] == "yes")
        let getReply = try JSONDecoder().decode(EchoReply.self, from: get.body)
        #expect(getReply.method == "GET")
        #expect(getReply.path == "/echo?x=1")
        #expect(getReply.headers.filter { $0.first?.lowercased() == "x-custom" }.map { $0[1] } == ["one", "two"])
        #expect(getReply.header("User-Agent") == "SignalFetch-HTTPClient/1")

        let payload = String(repeating: "päyload ", count: 1000)
        let post = try await client.execute(
            HTTPClient.Request(
                method: .post, url: "\(base)/echo", headers: ["Content-Type": "text/plain; charset=utf-8"],
                body: Data(payload.utf8)))
        #expect(post.status == 200)
        let postReply = try JSONDecoder().decode(EchoReply.self, from: post.body)
        #expect(postReply.method == "POST")
        #expect(postReply.body == payload)
        #expect(postReply.header("Content-Type") == "text/plain; charset=utf-8")
        #expect(postReply.header("Expect") == nil)
    }

    @Test func otherMethodsAndEmptyBodies() async throws {
        let server = try ServerProcess.echoServer()
        let client = HTTPClient(configuration: .init(httpVersion: .http1))
        defer { client.shutdown() }
        let base = "http://127.0.0.1:\(server.port)"

        let patch = try await client.execute(
            HTTPClient.Request(method: .patch, url: "\(base)/echo", body: Data("{\"seen\":true}".utf8)))
        let patchReply = try JSONDecoder().decode(EchoReply.self, from: patch.body)
        #expect(patchReply.method == "PATCH")
        #expect(patchReply.body == "{\"seen\":true}")
        #expect(patchReply.header("Content-Type") == nil)

        let delete = try await client.execute(HTTPClient.Request(method: .delete, url: "\(base)/echo"))
        #expect(try JSONDecoder().decode(EchoReply.self, from: delete.body).method == "DELETE")

        let emptyPost = try await client.execute(HTTPClient.Request(method: .post, url: "\(base)/echo"))
        let emptyReply = try JSONDecoder().decode(EchoReply.self, from: emptyPost.body)
        #expect(emptyReply.header("Content-Length") == "0")

        let missing = try await client.execute(HTTPClient.Request(url: "\(base)/nowhere"))
        #expect(missing.status == 404)
    }

    @Test func sequentialRequestsReuseOneConnection() async throws {
        let server = try ServerProcess.echoServer()
        let client = HTTPClient(configuration: .init(httpVersion: .http1))
        defer { client.shutdown() }
        for _ in 0..<5 {
            let response = try await client.execute(HTTPClient.Request(url: "http://127.0.0.1:\(server.port)/echo"))
            #expect(response.status == 200)
        }
        #expect(client.connectionsOpened == 1)
    }

    @Test func invalidHeaderValueIsRejectedWithoutEchoingIt() async throws {
        let client = HTTPClient()
        defer { client.shutdown() }
        let error = await #expect(throws: HTTPClientError.self) {
            try await client.execute(
                HTTPClient.Request(url: "http://127.0.0.1:1/", headers: ["Authorization": "secret\r\nX-Injected: 1"]))
        }
        guard case .invalidRequest(let reason) = error else {
            Issue.record("expected invalidRequest, got \(String(describing: error))")
            return
        }
        #expect(!reason.contains("secret"))
    }
}
