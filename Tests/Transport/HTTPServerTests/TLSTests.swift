import Foundation
import HTTPServer
import TestSupport
import Testing

/// A throwaway CA and a P-256 server certificate for 127.0.0.1 and localhost, made with the openssl CLI.
struct TestCertificates {
    let directory: TemporaryDirectory
    var caPath: String { directory.path("ca.pem") }
    var certificatePath: String { directory.path("server.pem") }
    var keyPath: String { directory.path("server.key") }

    init() async throws {
        let openssl = try #require(Subprocess.which("openssl"), "openssl is not installed")
        let directory = try TemporaryDirectory(prefix: "httpserver-tls")
        self.directory = directory
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
            .write(toFile: directory.path("ext.cnf"), atomically: true, encoding: .utf8)
        let steps: [[String]] = [
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", directory.path("ca.key")],
            [
                "req", "-x509", "-new", "-key", directory.path("ca.key"), "-sha256", "-days", "2", "-subj",
                "/CN=SignalFetch Test CA", "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
                "keyUsage=critical,keyCertSign,cRLSign", "-out", directory.path("ca.pem"),
            ],
            [
                "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out",
                directory.path("server.key"),
            ],
            [
                "req", "-new", "-key", directory.path("server.key"), "-subj", "/CN=localhost", "-out",
                directory.path("server.csr"),
            ],
            [
                "x509", "-req", "-in", directory.path("server.csr"), "-CA", directory.path("ca.pem"), "-CAkey",
                directory.path("ca.key"), "-CAcreateserial", "-days", "2", "-sha256", "-extfile",
                directory.path("ext.cnf"), "-out", directory.path("server.pem"),
            ],
        ]
        for step in steps {
            let result = try await offPool { try Subprocess.run(openssl, step) }
            try #require(result.status == 0, "openssl \(step[0]) failed: \(result.stderr)")
        }
    }
}

extension HTTPServerTests {
    @Suite("TLS")
    struct TLSTests {
        @Test("HTTPS with a P-256 certificate: curl --cacert and httpx verify=ca succeed")
        func httpsWithCustomCA() async throws {
            let certificates = try await TestCertificates()
            let server = try startServer {
                $0.tls = .init(certificatePath: certificates.certificatePath, privateKeyPath: certificates.keyPath)
            }
            let base = "https://127.0.0.1:\(server.port)"
            let response = try await curlResponse(["--cacert", certificates.caPath, "\(base)/v1/messages/7?q=tls"])
            #expect(response.status == 200)
            #expect(try response.json()["q"] as? String == "tls")

            let untrusted = try await curl(["\(base)/hello"])
            #expect(untrusted.status != 0, "a client without the CA must refuse the certificate")

            let result = try await httpxClient(["https://localhost:\(server.port)", certificates.caPath])
            #expect(result["get"] as? Int == 200)
            #expect(result["text"] as? String == "hello")
            #expect(result["post"] as? Int == 201)
            #expect((result["echo"] as? [String: Any])?["name"] as? String == "TLS")
            #expect(result["version"] as? String == "HTTP/1.1")
            await server.shutdown()
        }
    }
}
