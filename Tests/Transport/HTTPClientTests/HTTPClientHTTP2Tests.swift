import Foundation
import TestSupport
import Testing

@testable import HTTPClient

@Suite struct HTTPClientHTTP2Tests {
    private static func docroot(_ directory: TemporaryDirectory) throws -> String {
        let docroot = directory.path("htdocs")
        try FileManager.default.createDirectory(atPath: docroot, withIntermediateDirectories: true)
        try "hello over h2\n".write(toFile: docroot + "/hello.txt", atomically: true, encoding: .utf8)
        return docroot
    }

    @Test func cleartextHTTP2WithPriorKnowledge() async throws {
        let directory = try TemporaryDirectory()
        let server = try ServerProcess.nghttpd(docroot: try Self.docroot(directory), extraArguments: ["--echo-upload"])
        let client = HTTPClient(configuration: .init(httpVersion: .http2PriorKnowledge))
        defer { client.shutdown() }

        let get = try await client.execute(HTTPClient.Request(url: "http://127.0.0.1:\(server.port)/hello.txt"))
        #expect(get.status == 200)
        #expect(get.version == .http2)
        #expect(String(decoding: get.body, as: UTF8.self) == "hello over h2\n")
        #expect(get.headers["Content-Length"] == "14")

        let post = try await client.execute(
            HTTPClient.Request(method: .post, url: "http://127.0.0.1:\(server.port)/echo", body: Data("ping".utf8)))
        #expect(post.status == 200)
        #expect(String(decoding: post.body, as: UTF8.self) == "ping")
        #expect(client.connectionsOpened == 1)
    }

    @Test func http2OverTLSWithCustomCA() async throws {
        let directory = try TemporaryDirectory()
        let certificates = try TestCertificates.make(in: directory)
        let server = try ServerProcess.nghttpd(
            docroot: try Self.docroot(directory),
            tls: (certificates.serverKey, certificates.serverCertificate))
        let client = HTTPClient(configuration: .init(tls: .init(caFile: certificates.caCertificate)))
        defer { client.shutdown() }

        for host in ["127.0.0.1", "localhost"] {
            let response = try await client.execute(HTTPClient.Request(url: "https://\(host):\(server.port)/hello.txt"))
            #expect(response.status == 200)
            #expect(response.version == .http2)
            #expect(String(decoding: response.body, as: UTF8.self) == "hello over h2\n")
        }
    }

    @Test func cleartextHTTP2ReconnectsAfterTheServerRestarts() async throws {
        let directory = try TemporaryDirectory()
        let docroot = try Self.docroot(directory)
        var server: ServerProcess? = try ServerProcess.nghttpd(docroot: docroot)
        let port = try #require(server?.port)
        let client = HTTPClient(configuration: .init(httpVersion: .http2PriorKnowledge))
        defer { client.shutdown() }
        let url = "http://127.0.0.1:\(port)/hello.txt"

        #expect(try await client.execute(HTTPClient.Request(url: url)).status == 200)
        server = nil
        server = try ServerProcess.nghttpd(docroot: docroot, port: port)
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<20 { group.addTask { try await client.execute(HTTPClient.Request(url: url)).status } }
            var statuses: [Int] = []
            for try await status in group { statuses.append(status) }
            return statuses
        }
        #expect(statuses == Array(repeating: 200, count: 20))
        #expect(client.connectionsOpened >= 2)
    }

    @Test(arguments: [false, true])
    func concurrentRequestsShareOneConnection(overTLS: Bool) async throws {
        let directory = try TemporaryDirectory()
        let certificates = try TestCertificates.make(in: directory)
        let server = try ServerProcess.nghttpd(
            docroot: try Self.docroot(directory),
            tls: overTLS ? (certificates.serverKey, certificates.serverCertificate) : nil)
        let configuration = HTTPClient.Configuration(
            httpVersion: overTLS ? .http2 : .http2PriorKnowledge, tls: .init(caFile: certificates.caCertificate))
        let client = HTTPClient(configuration: configuration)
        defer { client.shutdown() }
        let url = "\(overTLS ? "https" : "http")://127.0.0.1:\(server.port)/hello.txt"

        let statuses = try await withThrowingTaskGroup(of: (Int, HTTPVersion).self) { group in
            for _ in 0..<100 {
                group.addTask {
                    let response = try await client.execute(HTTPClient.Request(url: url))
                    return (response.status, response.version)
                }
            }
            var results: [(Int, HTTPVersion)] = []
            for try await result in group { results.append(result) }
            return results
        }
        #expect(statuses.count == 100)
        #expect(statuses.allSatisfy { $0.0 == 200 && $0.1 == .http2 })
        #expect(client.connectionsOpened == 1)
    }

    @Test func requestsBeyondTheStreamLimitQueueOnTheSameConnection() async throws {
        let directory = try TemporaryDirectory()
        let server = try ServerProcess.nghttpd(docroot: try Self.docroot(directory))
        let client = HTTPClient(
            configuration: .init(httpVersion: .http2PriorKnowledge, maximumConcurrentStreams: 10))
        defer { client.shutdown() }
        let url = "http://127.0.0.1:\(server.port)/hello.txt"
        let okCount = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<250 {
                group.addTask { try await client.execute(HTTPClient.Request(url: url)).status }
            }
            var count = 0
            for try await status in group where status == 200 { count += 1 }
            return count
        }
        #expect(okCount == 250)
        #expect(client.connectionsOpened == 1)
    }
}
