import Foundation
import OpenSSLCrypto
import TestSupport
import Testing

/// A scripted HTTP/2 APNs stand-in (Python `h2` over asyncio): it answers each device token with the status
/// and reason the test chose, records every request, and counts the most streams open at once. `GET /stats`
/// returns what it recorded.
final class ScriptedAPNsServer {
    /// How the server answers one device token.
    struct Answer: Encodable {
        var status: Int = 200
        var reason: String?
        var retryAfter: String?
        var timestamp: Int64?
        var uniqueId: String?
        /// Answer `ExpiredProviderToken` to the first bearer token seen for this device, 200 to any other.
        var expireFirstToken: Bool?
    }

    /// One recorded request.
    struct RecordedRequest: Decodable {
        var path: String
        var method: String
        var headers: [String: String]
        var body: String
        var clientCert: Bool
    }

    struct Stats: Decodable {
        var maxConcurrent: Int
        var requests: [RecordedRequest]
        /// The number of requests (set in summaries, which leave `requests` empty).
        var count: Int?
    }

    let directory: TemporaryDirectory
    let process: ChildProcess
    let port: Int
    let tls: Bool
    /// The CA that signed the server certificate (and the client certificate).
    let caFile: String
    /// A client certificate and key signed by the CA.
    let clientCertificateFile: String
    let clientKeyFile: String

    var baseURL: String { (tls ? "https" : "http") + "://127.0.0.1:\(port)" }

    init(
        answers: [String: Answer] = [:], tls: Bool = true, maxStreams: Int = 1000, delay: Double = 0,
        requireClientCertificateCA: Bool = false
    ) throws {
        let python = TestEnvironment.python
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw ServerError("Python not found at \(python); set SIGNALFETCH_PYTHON to a venv with h2")
        }
        directory = try TemporaryDirectory(prefix: "apns-server")
        self.tls = tls
        let authority = try DevCertificates.makeCertificateAuthority(commonName: "APNs test CA")
        let server = try DevCertificates.makeServerCertificate(hosts: ["127.0.0.1", "localhost"], signedBy: authority)
        let client = try DevCertificates.makeServerCertificate(hosts: ["provider.test"], signedBy: authority)
        caFile = directory.path("ca.pem")
        clientCertificateFile = directory.path("client.pem")
        clientKeyFile = directory.path("client.key")
        try authority.certificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        try server.certificatePEM.write(toFile: directory.path("server.pem"), atomically: true, encoding: .utf8)
        try server.privateKeyPEM.write(toFile: directory.path("server.key"), atomically: true, encoding: .utf8)
        try client.certificatePEM.write(toFile: clientCertificateFile, atomically: true, encoding: .utf8)
        try client.privateKeyPEM.write(toFile: clientKeyFile, atomically: true, encoding: .utf8)
        try JSONEncoder().encode(answers).write(to: URL(fileURLWithPath: directory.path("script.json")))

        var arguments = [
            TestEnvironment.peer("apns_scripted_server.py"), "--script", directory.path("script.json"),
            "--max-streams", String(maxStreams), "--delay", String(delay),
        ]
        if tls {
            arguments += ["--cert", directory.path("server.pem"), "--key", directory.path("server.key")]
            if requireClientCertificateCA { arguments += ["--client-ca", caFile] }
        }
        process = try ChildProcess(python, arguments, logDirectory: directory.url.path)
        guard process.waitForOutput(timeout: 20, { $0.contains("PORT ") }),
            let line = process.output.split(separator: "\n").first(where: { $0.hasPrefix("PORT ") }),
            let port = Int(line.dropFirst(5).trimmingCharacters(in: .whitespaces))
        else {
            throw ServerError("the scripted server did not start: \(process.errorOutput)")
        }
        self.port = port
    }

    deinit { process.stop(signal: SIGKILL) }

    /// What the server recorded so far (fetched with curl over HTTP/2); a summary leaves out the requests.
    func stats(summary: Bool = false) throws -> Stats {
        guard let curl = Subprocess.which("curl") else { throw ServerError("curl not found on PATH") }
        var arguments = ["-sS", "--fail", "--max-time", "10"]
        arguments += tls ? ["--http2", "--cacert", caFile] : ["--http2-prior-knowledge"]
        let result = try Subprocess.run(curl, arguments + [baseURL + (summary ? "/stats?summary" : "/stats")])
        guard result.status == 0 else {
            throw ServerError("curl /stats failed: \(result.stderr); server log: \(process.errorOutput)")
        }
        return try JSONDecoder().decode(Stats.self, from: Data(result.stdout.utf8))
    }

    struct ServerError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

}
