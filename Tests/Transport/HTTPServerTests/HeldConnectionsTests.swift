import Foundation
import HTTPServer
import TestSupport
import Testing

extension HTTPServerTests {
    /// Thousands of idle TLS connections, held by another process as awake devices hold them.
    @Suite("Held connections", .serialized)
    struct HeldConnectionsTests {
        /// Starts a TLS server and a peer process holding `count` idle, handshaken TLS connections to it.
        static func serverWithHeldConnections(
            _ count: Int, certificates: TestCertificates
        ) async throws -> (HTTPServer, ChildProcess) {
            let server = try startServer {
                $0.tls = .init(certificatePath: certificates.certificatePath, privateKeyPath: certificates.keyPath)
                $0.connectionLimit = count + 100
                $0.idleTimeoutSeconds = 600
                $0.shutdownGracePeriod = .milliseconds(200)
            }
            let holder = try ChildProcess(
                TestEnvironment.python,
                [
                    TestEnvironment.peer("hold_tls_connections.py"), "127.0.0.1", String(server.port),
                    certificates.caPath, String(count),
                ],
                logDirectory: certificates.directory.url.path)
            let held = try await offPool { holder.waitForOutput(timeout: 120) { $0.contains("held \(count)") } }
            try #require(held, "the peer did not hold \(count) connections: \(holder.errorOutput)")
            return (server, holder)
        }

        /// The peer's count of its connections the server has ended, read once it is told to stop.
        static func stopAndCount(_ holder: ChildProcess) async throws -> (open: Int, closed: Int) {
            let status = try await offPool { holder.stop(signal: SIGTERM, timeout: 60) }
            try #require(status == 0, "the peer failed: \(holder.errorOutput)")
            let line = try #require(holder.output.split(separator: "\n").last)
            let counts = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Int])
            return (try #require(counts["open"]), try #require(counts["closed"]))
        }

        @Test("with 5,000 idle TLS connections held, a new client is answered and every held connection stays open")
        func answersUnderFiveThousandIdleConnections() async throws {
            let certificates = try await TestCertificates()
            let (server, holder) = try await Self.serverWithHeldConnections(5_000, certificates: certificates)
            defer { holder.stop(signal: SIGKILL) }
            for query in ["first", "second", "third"] {
                let response = try await curlResponse([
                    "--cacert", certificates.caPath, "https://127.0.0.1:\(server.port)/v1/messages/7?q=\(query)",
                ])
                #expect(response.status == 200)
                #expect(try response.json()["q"] as? String == query)
            }
            let counts = try await Self.stopAndCount(holder)
            #expect(counts.open == 5_000 && counts.closed == 0)
            await server.shutdown()
        }

        @Test("shutdown with 3,000 TLS connections open and a request in flight ends them all and returns")
        func shutdownWithThousandsOfConnections() async throws {
            let certificates = try await TestCertificates()
            let (server, holder) = try await Self.serverWithHeldConnections(3_000, certificates: certificates)
            defer { holder.stop(signal: SIGKILL) }
            let port = server.port
            async let hanging = curlResponse(["--cacert", certificates.caPath, "https://127.0.0.1:\(port)/hang"])
            #expect(await eventually { server.inFlightCount == 1 })
            await server.shutdown()
            let response = try await hanging
            #expect(response.status == 503)
            #expect(server.inFlightCount == 0)
            let counts = try await Self.stopAndCount(holder)
            #expect(counts.open == 0 && counts.closed == 3_000)
            let refused = try await curl(["--cacert", certificates.caPath, "https://127.0.0.1:\(port)/hello"])
            #expect(refused.status != 0)
        }
    }
}
