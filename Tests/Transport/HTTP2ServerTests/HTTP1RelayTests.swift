import Foundation
import HTTP2Server
import HTTPServer
import TestSupport
import Testing

/// The opt-in HTTP/1.1 relay: one TLS port, h2 for clients that offer it, the relay target for clients that
/// offer only `http/1.1`.
@Suite("HTTP2Server HTTP/1.1 relay")
struct HTTP1RelayTests {
    @Test("ALPN http/1.1 is relayed to the cleartext server; h2 stays on the HTTP/2 handler")
    func bothProtocolsOnOnePort() async throws {
        let certificates = try await TestCertificates.make()
        let target = try HTTPServer(
            configuration: HTTPServer.Configuration(host: "127.0.0.1", port: 0),
            handler: { request in
                HTTPResponse(
                    status: .ok, headers: ["Content-Type": "text/plain"],
                    body: Data("http1 \(request.method.rawValue) \(request.path) \(request.body.count)".utf8))
            })
        let server = try startServer(tls: certificates.tls) {
            $0.http1Relay = HTTP2ServerConfiguration.HTTP1Relay(port: Int(target.port))
        }
        let curl = try tool("curl")
        let h2 = try await run(
            curl,
            [
                "-sS", "--http2", "--cacert", certificates.caPath, "-w", "\n%{http_version}",
                "https://localhost:\(server.port)/hello",
            ])
        #expect(h2.stdout == "hello over h2\n2", "\(h2.stderr)")
        let big = String(repeating: "z", count: 300_000)
        let bodyPath = certificates.directory.path("big.txt")
        try big.write(toFile: bodyPath, atomically: true, encoding: .utf8)
        let options = [
            "-sS", "--http1.1", "--cacert", certificates.caPath, "-w", "\n%{http_version} %{num_connects}\n",
        ]
        let http1 = try await run(
            curl,
            options + ["https://localhost:\(server.port)/a", "--next"] + options
                + ["--data-binary", "@\(bodyPath)", "https://localhost:\(server.port)/b"])
        #expect(
            http1.stdout == "http1 GET /a 0\n1.1 1\nhttp1 POST /b 300000\n1.1 0\n", "\(http1.stdout) \(http1.stderr)")
        await server.shutdown()
        await target.shutdown()
    }

    @Test("with the relay target gone, an http/1.1 client is closed and h2 keeps working")
    func relayTargetDown() async throws {
        let certificates = try await TestCertificates.make()
        let server = try startServer(tls: certificates.tls) {
            $0.http1Relay = HTTP2ServerConfiguration.HTTP1Relay(port: Int(freeLocalPort()))
        }
        let curl = try tool("curl")
        let http1 = try await run(
            curl, ["-sS", "--http1.1", "--cacert", certificates.caPath, "https://localhost:\(server.port)/a"])
        #expect(http1.status != 0)
        let h2 = try await run(
            curl, ["-sS", "--http2", "--cacert", certificates.caPath, "https://localhost:\(server.port)/hello"])
        #expect(h2.stdout == "hello over h2")
        await server.shutdown()
    }
}
