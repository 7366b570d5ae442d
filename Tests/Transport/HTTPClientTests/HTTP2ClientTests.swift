import Foundation
import HTTP2Client
import HTTP2Server
import Synchronization
import TestSupport
import Testing

/// HTTP2Client against real HTTP/2 servers: HTTP2Server in process (TLS with a test CA, and h2c) and nghttpd.
@Suite struct HTTP2ClientTests {
    /// Tracks how many `/slow-count` requests the server handles at once, and how many `/slow` requests reached it.
    private final class Concurrency: Sendable {
        let current = Atomic<Int>(0)
        let highest = Atomic<Int>(0)
        let slowStarted = Atomic<Int>(0)

        func enter() {
            let now = current.add(1, ordering: .relaxed).newValue
            var seen = highest.load(ordering: .relaxed)
            while now > seen {
                let (exchanged, original) = highest.compareExchange(
                    expected: seen, desired: now, ordering: .relaxed)
                if exchanged { break }
                seen = original
            }
        }

        func leave() { current.subtract(1, ordering: .relaxed) }
    }

    /// An HTTP2Server with a few routes, over TLS (certificates from a fresh test CA) or h2c.
    private struct Fixture {
        let directory: TemporaryDirectory
        let certificates: TestCertificates
        let otherCertificates: TestCertificates
        let server: HTTP2Server
        let concurrency = Concurrency()
        let tls: Bool

        init(tls: Bool = true, maxConcurrentStreams: Int = 1000) throws {
            directory = try TemporaryDirectory()
            certificates = try TestCertificates.make(in: directory, name: "trusted")
            otherCertificates = try TestCertificates.make(in: directory, name: "other")
            self.tls = tls
            let concurrency = self.concurrency
            server = HTTP2Server(
                configuration: HTTP2ServerConfiguration(
                    tls: tls
                        ? .init(
                            certificateChainPath: certificates.serverCertificate,
                            privateKeyPath: certificates.serverKey) : nil,
                    maxConcurrentStreams: maxConcurrentStreams)
            ) { request in
                try await Fixture.route(request, concurrency: concurrency)
            }
            try server.start()
        }

        var baseURL: String { "\(tls ? "https" : "http")://127.0.0.1:\(server.port)" }

        /// Whether a `/slow` request has reached the server's handler.
        var slowRequestArrived: Bool { concurrency.slowStarted.load(ordering: .relaxed) > 0 }

        func client(
            tls: HTTP2Client.TLS? = nil, requestTimeout: Duration = .seconds(10), maximumConcurrentStreams: Int = 1000,
            maximumResponseBodySize: Int = 1 << 20
        ) -> HTTP2Client {
            HTTP2Client(
                configuration: .init(
                    baseURL: baseURL, tls: tls ?? .init(caFile: certificates.caCertificate),
                    requestTimeout: requestTimeout, maximumConcurrentStreams: maximumConcurrentStreams,
                    maximumResponseBodySize: maximumResponseBodySize))
        }

        static func route(_ request: HTTP2Request, concurrency: Concurrency) async throws -> HTTP2Response {
            switch (request.method, request.path) {
            case ("GET", "/hello"):
                return HTTP2Response(
                    status: 200, headers: [HTTPField("x-route", "hello"), HTTPField("content-type", "text/plain")],
                    body: Data("hello".utf8))
            case ("POST", "/echo"):
                let marker = request.header("x-marker") ?? ""
                return HTTP2Response(
                    status: 201,
                    headers: [HTTPField("x-marker", marker), HTTPField("x-scheme", request.scheme ?? "")],
                    body: request.body)
            case ("GET", "/empty"):
                // A response that is a single HEADERS frame ending the stream, as APNs sends for 200.
                return HTTP2Response(status: 200, headers: [HTTPField("apns-id", "abc")])
            case ("GET", "/slow"):
                concurrency.slowStarted.add(1, ordering: .relaxed)
                try await Task.sleep(for: .seconds(3))
                return HTTP2Response(status: 200, body: Data("late".utf8))
            case ("GET", "/slow-count"):
                concurrency.enter()
                defer { concurrency.leave() }
                try await Task.sleep(for: .milliseconds(30))
                return HTTP2Response(status: 200)
            case ("GET", "/big"):
                return HTTP2Response(status: 200, body: Data(repeating: 0x61, count: 300_000))
            case ("GET", "/goaway"):
                request.goAwayAfterResponse()
                return HTTP2Response(status: 200, body: Data("bye".utf8))
            default:
                return HTTP2Response(status: 404, body: Data(#"{"error":"not_found"}"#.utf8))
            }
        }
    }

    @Test func getOverTLSReturnsStatusHeadersAndBody() async throws {
        let fixture = try Fixture()
        let client = fixture.client()
        defer { client.shutdown() }
        let response = try await client.execute(.init(path: "/hello"))
        #expect(response.status == 200)
        #expect(String(decoding: response.body, as: UTF8.self) == "hello")
        #expect(response[header: "X-Route"] == "hello")
        let missing = try await client.execute(.init(path: "/nowhere"))
        #expect(missing.status == 404)
        #expect(client.connectionsOpened == 1)
    }

    @Test func anAddressTheFilterRefusesIsNeverConnectedTo() async throws {
        let fixture = try Fixture()
        let seen = Mutex<[String]>([])
        let client = HTTP2Client(
            configuration: .init(
                baseURL: "https://localhost:\(fixture.server.port)",
                tls: .init(caFile: fixture.certificates.caCertificate),
                permitsAddress: { address in
                    seen.withLock { $0.append(address) }
                    return false
                }))
        defer { client.shutdown() }
        await #expect(throws: HTTPClientError.connectionFailed("no address of localhost is permitted")) {
            try await client.execute(.init(path: "/hello"))
        }
        #expect(seen.withLock { $0 }.contains("127.0.0.1"))
        let allowing = HTTP2Client(
            configuration: .init(
                baseURL: fixture.baseURL, tls: .init(caFile: fixture.certificates.caCertificate),
                permitsAddress: { $0 == "127.0.0.1" }))
        defer { allowing.shutdown() }
        #expect(try await allowing.execute(.init(path: "/hello")).status == 200)
    }

    @Test func headersOnlyResponseIsComplete() async throws {
        let fixture = try Fixture()
        let client = fixture.client()
        defer { client.shutdown() }
        for _ in 0..<50 {
            let response = try await client.execute(.init(path: "/empty"))
            #expect(response.status == 200)
            #expect(response.body.isEmpty)
            #expect(response[header: "apns-id"] == "abc")
        }
        #expect(client.connectionsOpened == 1)
    }

    @Test(arguments: [false, true])
    func postBodiesRoundTripOverH2cAndTLS(tls: Bool) async throws {
        let fixture = try Fixture(tls: tls)
        let client = fixture.client()
        defer { client.shutdown() }
        // Larger than the default 64 KiB flow-control window, so WINDOW_UPDATEs must flow.
        let body = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let response = try await client.execute(
            .init(method: "POST", path: "/echo", headers: [.init("X-Marker", "m-1")], body: body))
        #expect(response.status == 201)
        #expect(response.body == body)
        #expect(response[header: "x-marker"] == "m-1")
        #expect(response[header: "x-scheme"] == (tls ? "https" : "http"))
    }

    @Test func manyConcurrentRequestsShareOneConnection() async throws {
        let fixture = try Fixture()
        let client = fixture.client()
        defer { client.shutdown() }
        let statuses = await withTaskGroup(of: Int.self) { group in
            for index in 0..<500 {
                group.addTask {
                    let body = Array("request \(index)".utf8)
                    let response = try? await client.execute(.init(method: "POST", path: "/echo", body: body))
                    return response?.body == body ? response?.status ?? 0 : -1
                }
            }
            var all: [Int] = []
            for await status in group { all.append(status) }
            return all
        }
        #expect(statuses.count == 500)
        #expect(statuses.allSatisfy { $0 == 201 })
        #expect(client.connectionsOpened == 1)
        #expect(client.maximumStreamsInFlight > 1)
    }

    @Test func staysWithinTheServersStreamLimit() async throws {
        let fixture = try Fixture(maxConcurrentStreams: 4)
        let client = fixture.client()
        defer { client.shutdown() }
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<40 {
                group.addTask { _ = try? await client.execute(.init(path: "/slow-count")) }
            }
        }
        #expect(fixture.concurrency.highest.load(ordering: .relaxed) == 4)
        #expect(client.maximumStreamsInFlight == 4)
        #expect(client.connectionsOpened == 1)
    }

    @Test func staysWithinItsOwnStreamLimit() async throws {
        let fixture = try Fixture()
        let client = fixture.client(maximumConcurrentStreams: 3)
        defer { client.shutdown() }
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<30 {
                group.addTask { _ = try? await client.execute(.init(path: "/slow-count")) }
            }
        }
        #expect(fixture.concurrency.highest.load(ordering: .relaxed) == 3)
    }

    @Test func realPeerNghttpd() async throws {
        let directory = try TemporaryDirectory()
        let certificates = try TestCertificates.make(in: directory)
        let docroot = directory.path("htdocs")
        try FileManager.default.createDirectory(atPath: docroot, withIntermediateDirectories: true)
        try "from nghttpd".write(toFile: docroot + "/index.html", atomically: true, encoding: .utf8)
        let tlsServer = try ServerProcess.nghttpd(
            docroot: docroot, tls: (certificates.serverKey, certificates.serverCertificate))
        let clearServer = try ServerProcess.nghttpd(docroot: docroot)
        for (url, tls) in [
            ("https://localhost:\(tlsServer.port)", HTTP2Client.TLS(caFile: certificates.caCertificate)),
            ("http://127.0.0.1:\(clearServer.port)", HTTP2Client.TLS()),
        ] {
            let client = HTTP2Client(configuration: .init(baseURL: url, tls: tls))
            defer { client.shutdown() }
            let responses = try await withThrowingTaskGroup(of: HTTP2Client.Response.self) { group in
                for _ in 0..<20 { group.addTask { try await client.execute(.init(path: "/index.html")) } }
                var all: [HTTP2Client.Response] = []
                for try await response in group { all.append(response) }
                return all
            }
            #expect(responses.allSatisfy { $0.status == 200 && $0.body == Array("from nghttpd".utf8) })
            #expect(client.connectionsOpened == 1)
        }
    }

    @Test func untrustedCertificateIsRefusedBeforeAnyRequest() async throws {
        let fixture = try Fixture()
        for tls in [HTTP2Client.TLS(), HTTP2Client.TLS(caFile: fixture.otherCertificates.caCertificate)] {
            let client = fixture.client(tls: tls)
            defer { client.shutdown() }
            let error = await #expect(throws: HTTPClientError.self) {
                try await client.execute(.init(path: "/hello"))
            }
            guard case .untrustedCertificate(let reason) = error else {
                Issue.record("expected untrustedCertificate, got \(String(describing: error))")
                continue
            }
            #expect(!reason.isEmpty)
        }
        #expect(fixture.server.metrics.streamsServed == 0)
    }

    @Test func hostNameMustMatchTheCertificate() async throws {
        let directory = try TemporaryDirectory()
        let elsewhere = try TestCertificates.make(
            in: directory, name: "elsewhere", subjectAltName: "DNS:elsewhere.test")
        let server = HTTP2Server(
            configuration: HTTP2ServerConfiguration(
                tls: .init(certificateChainPath: elsewhere.serverCertificate, privateKeyPath: elsewhere.serverKey))
        ) { _ in HTTP2Response(status: 200) }
        try server.start()
        for host in ["127.0.0.1", "localhost"] {
            let client = HTTP2Client(
                configuration: .init(
                    baseURL: "https://\(host):\(server.port)", tls: .init(caFile: elsewhere.caCertificate)))
            defer { client.shutdown() }
            let error = await #expect(throws: HTTPClientError.self) { try await client.execute(.init(path: "/")) }
            guard case .untrustedCertificate(let reason) = error else {
                Issue.record("expected untrustedCertificate for \(host), got \(String(describing: error))")
                continue
            }
            #expect(reason.contains("mismatch"))
        }
        #expect(server.metrics.streamsServed == 0)
        await server.shutdown()
    }

    @Test func pinsAreEnforced() async throws {
        let fixture = try Fixture()
        let matching = fixture.client(
            tls: .init(
                caFile: fixture.certificates.caCertificate,
                pinnedPublicKeys: [fixture.otherCertificates.serverPin, "sha256//" + fixture.certificates.serverPin]))
        defer { matching.shutdown() }
        #expect(try await matching.execute(.init(path: "/hello")).status == 200)

        let mismatched = fixture.client(
            tls: .init(
                caFile: fixture.certificates.caCertificate, pinnedPublicKeys: [fixture.otherCertificates.serverPin]))
        defer { mismatched.shutdown() }
        await #expect(throws: HTTPClientError.pinMismatch) { try await mismatched.execute(.init(path: "/hello")) }
    }

    @Test func unusableCAFileIsATLSFailure() async throws {
        let fixture = try Fixture()
        let client = fixture.client(tls: .init(caFile: fixture.directory.path("missing.pem")))
        defer { client.shutdown() }
        let error = await #expect(throws: HTTPClientError.self) { try await client.execute(.init(path: "/hello")) }
        guard case .tlsFailure(let reason) = error else {
            Issue.record("expected tlsFailure, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("missing.pem"))
    }

    @Test func refusedConnectionFailsPromptly() async throws {
        let port = freeLocalPort()
        let client = HTTP2Client(
            configuration: .init(baseURL: "http://127.0.0.1:\(port)", requestTimeout: .seconds(20)))
        defer { client.shutdown() }
        // The request fails with the connection (not with its 20 s timeout, which would be `.timeout`).
        let error = await #expect(throws: HTTPClientError.self) {
            try await client.execute(.init(path: "/"))
        }
        guard case .connectionFailed = error else {
            Issue.record("expected connectionFailed, got \(String(describing: error))")
            return
        }
    }

    @Test func requestTimeoutResetsTheStreamAndKeepsTheConnection() async throws {
        let fixture = try Fixture()
        let client = fixture.client()
        defer { client.shutdown() }
        await #expect(throws: HTTPClientError.timeout) {
            try await client.execute(.init(path: "/slow", timeout: .milliseconds(300)))
        }
        #expect(try await client.execute(.init(path: "/hello")).status == 200)
        #expect(client.connectionsOpened == 1)
    }

    @Test func cancellationEndsTheRequest() async throws {
        let fixture = try Fixture()
        let client = fixture.client()
        defer { client.shutdown() }
        let task = Task { try await client.execute(.init(path: "/slow")) }
        #expect(await eventually { fixture.slowRequestArrived })
        task.cancel()
        await #expect(throws: HTTPClientError.cancelled) { try await task.value }
        #expect(try await client.execute(.init(path: "/hello")).status == 200)
    }

    @Test func oversizedResponseFailsAndTheConnectionStaysUsable() async throws {
        let fixture = try Fixture()
        let client = fixture.client(maximumResponseBodySize: 100_000)
        defer { client.shutdown() }
        await #expect(throws: HTTPClientError.responseTooLarge(limit: 100_000)) {
            try await client.execute(.init(path: "/big"))
        }
        #expect(try await client.execute(.init(path: "/hello")).status == 200)
        #expect(client.connectionsOpened == 1)
    }

    @Test func invalidRequestsAreRefusedBeforeSending() async throws {
        let fixture = try Fixture()
        let client = fixture.client()
        defer { client.shutdown() }
        let bad: [HTTP2Client.Request] = [
            .init(path: "/hello", headers: [.init("x-injected", "a\r\nb: c")]),
            .init(path: "/hello", headers: [.init("bad name", "v")]),
            .init(path: "/hello", headers: [.init("connection", "close")]),
            .init(path: "/hello", headers: [.init("Host", "elsewhere")]),
            .init(path: "/hello", headers: [.init(":authority", "elsewhere")]),
            .init(path: "no-slash"),
            .init(path: "/with space"),
            .init(method: "GE T", path: "/hello"),
        ]
        for request in bad {
            let error = await #expect(throws: HTTPClientError.self) { try await client.execute(request) }
            guard case .invalidRequest(let reason) = error else {
                Issue.record("expected invalidRequest, got \(String(describing: error))")
                continue
            }
            #expect(!reason.contains("a\r\nb"))
        }
        #expect(fixture.server.metrics.streamsServed == 0)
        let badURL = HTTP2Client(configuration: .init(baseURL: "ftp://example.com"))
        defer { badURL.shutdown() }
        await #expect(throws: HTTPClientError.self) { try await badURL.execute(.init(path: "/")) }
    }

    @Test func goAwayMovesLaterRequestsToANewConnection() async throws {
        let fixture = try Fixture()
        let client = fixture.client()
        defer { client.shutdown() }
        let bye = try await client.execute(.init(path: "/goaway"))
        #expect(bye.status == 200)
        #expect(String(decoding: bye.body, as: UTF8.self) == "bye")
        // The GOAWAY may still be in flight: whatever it refuses unprocessed is retried on a new connection.
        for _ in 0..<5 {
            #expect(try await client.execute(.init(path: "/hello")).status == 200)
        }
        #expect(client.connectionsOpened == 2)
    }

    @Test func serverThatClosesMidRequestGivesConnectionLost() async throws {
        // A TCP listener that reads the client's first bytes and closes: not an HTTP/2 server at all.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        #expect(bound == 0)
        #expect(listen(listener, 4) == 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        let port = UInt16(bigEndian: address.sin_port)
        let closer = Thread {
            let connection = accept(listener, nil, nil)
            var buffer = [UInt8](repeating: 0, count: 1024)
            _ = recv(connection, &buffer, buffer.count, 0)
            close(connection)
        }
        closer.start()
        let client = HTTP2Client(
            configuration: .init(baseURL: "http://127.0.0.1:\(port)", requestTimeout: .seconds(10)))
        defer { client.shutdown() }
        let error = await #expect(throws: HTTPClientError.self) { try await client.execute(.init(path: "/")) }
        switch error {
        case .connectionLost?, .connectionFailed?: break
        default: Issue.record("expected connectionLost, got \(String(describing: error))")
        }
    }

    @Test func shutdownFailsPendingAndLaterRequests() async throws {
        let fixture = try Fixture()
        let client = fixture.client()
        let pending = Task { try await client.execute(.init(path: "/slow")) }
        #expect(await eventually { fixture.slowRequestArrived })
        client.shutdown()
        await #expect(throws: HTTPClientError.shutdown) { try await pending.value }
        await #expect(throws: HTTPClientError.shutdown) { try await client.execute(.init(path: "/hello")) }
    }
}
