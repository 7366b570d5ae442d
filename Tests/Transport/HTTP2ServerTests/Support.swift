import Foundation
import HTTP2Server
import Locking
import TestSupport
import Testing

/// A CA and a P-256 server certificate for `localhost` / `127.0.0.1`, made with the `openssl` CLI.
struct TestCertificates {
    let directory: TemporaryDirectory
    var caPath: String { directory.path("ca.pem") }
    var certificatePath: String { directory.path("server.pem") }
    var keyPath: String { directory.path("server.key") }
    var tls: HTTP2ServerConfiguration.TLS {
        HTTP2ServerConfiguration.TLS(certificateChainPath: certificatePath, privateKeyPath: keyPath)
    }

    static func make() async throws -> TestCertificates {
        let directory = try TemporaryDirectory(prefix: "h2server-tls")
        let openssl = try tool("openssl")
        let ext = directory.path("server.ext")
        try """
        subjectAltName=DNS:localhost,IP:127.0.0.1
        basicConstraints=critical,CA:FALSE
        keyUsage=critical,digitalSignature
        extendedKeyUsage=serverAuth
        subjectKeyIdentifier=hash
        authorityKeyIdentifier=keyid,issuer
        """.write(toFile: ext, atomically: true, encoding: .utf8)
        let steps: [[String]] = [
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", directory.path("ca.key")],
            [
                "req", "-x509", "-new", "-key", directory.path("ca.key"), "-sha256", "-days", "2",
                "-subj", "/CN=HTTP2Server Test CA", "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-out", directory.path("ca.pem"),
            ],
            [
                "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out",
                directory.path("server.key"),
            ],
            [
                "req", "-new", "-key", directory.path("server.key"), "-subj", "/CN=localhost",
                "-out", directory.path("server.csr"),
            ],
            [
                "x509", "-req", "-in", directory.path("server.csr"), "-CA", directory.path("ca.pem"),
                "-CAkey", directory.path("ca.key"), "-CAcreateserial", "-days", "2", "-sha256",
                "-extfile", ext, "-out", directory.path("server.pem"),
            ],
        ]
        for step in steps {
            let result = try await run(openssl, step)
            try #require(result.status == 0, "openssl \(step[0]) failed: \(result.stderr)")
        }
        return TestCertificates(directory: directory)
    }
}

/// Finds a required command-line tool, failing the test with a clear message when it is missing.
func tool(_ name: String) throws -> String {
    try #require(Subprocess.which(name), "required tool '\(name)' is not installed (see Scripts/bootstrap)")
}

/// The test venv's Python, failing clearly when it is missing.
func python() throws -> String {
    let path = TestEnvironment.python
    try #require(
        FileManager.default.isExecutableFile(atPath: path),
        "Python not found at \(path); set SIGNALFETCH_PYTHON to a venv with h2 and httpx[http2]")
    return path
}

/// Runs a process to completion on a plain thread, so the Swift concurrency pool (which runs the
/// server's handlers) is never blocked by a waiting test.
func run(_ executable: String, _ arguments: [String], input: String? = nil) async throws -> ProcessResult {
    try await withCheckedThrowingContinuation { continuation in
        Thread {
            do {
                continuation.resume(returning: try Subprocess.run(executable, arguments, input: input))
            } catch {
                continuation.resume(throwing: error)
            }
        }.start()
    }
}

/// A child process running in the background, its output collected in files (started with `posix_spawn`:
/// `Foundation.Process` objects with a termination handler were never freed).
final class BackgroundProcess: Sendable {
    private let child: ChildProcess
    private let directory: TemporaryDirectory

    init(_ executable: String, _ arguments: [String]) throws {
        directory = try TemporaryDirectory(prefix: "h2server-proc")
        child = try ChildProcess(executable, arguments, logDirectory: directory.url.path)
    }

    /// Sends SIGKILL: the peer vanishes without closing anything.
    func kill() { _ = Glibc.kill(child.pid, SIGKILL) }

    /// What a finished background process printed.
    struct Output {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Waits for the process to exit and returns its output.
    func wait() async -> Output {
        let child = self.child
        let raw = (try? await offPool { child.waitForExit() }) ?? -1
        let status = raw & 0x7f == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
        return Output(status: status, stdout: child.output, stderr: child.errorOutput)
    }
}

/// Observes what the test handler did.
final class Probe: Sendable {
    private let counters = LockedValue((started: 0, cancelled: 0))
    var started: Int { counters.withLock { $0.started } }
    var cancelled: Int { counters.withLock { $0.cancelled } }
    func didStart() { counters.withLock { $0.started += 1 } }
    func didCancel() { counters.withLock { $0.cancelled += 1 } }
}

/// The handler used by the tests:
/// `/hello` → text; `/echo` → the request body; `/info` → request fields as JSON;
/// `/slow?ms=N` → answers after N ms; `/goaway` → answers and asks for GOAWAY.
func testHandler(_ probe: Probe) -> @Sendable (HTTP2Request) async throws -> HTTP2Response {
    { request in
        let path = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
        switch path {
        case "/hello":
            return HTTP2Response(
                status: 200, headers: [HTTPField("content-type", "text/plain")], body: Data("hello over h2".utf8))
        case "/echo":
            return HTTP2Response(
                status: 200, headers: [HTTPField("x-body-length", String(request.body.count))], body: request.body)
        case "/info":
            let info: [String: String] = [
                "method": request.method, "path": request.path, "authority": request.authority ?? "",
                "scheme": request.scheme ?? "", "user-agent": request.header("User-Agent") ?? "",
                "connection": String(request.connectionID),
            ]
            return HTTP2Response(status: 200, body: try JSONEncoder().encode(info))
        case "/slow":
            probe.didStart()
            let milliseconds = Int(request.path.split(separator: "=").last ?? "") ?? 1000
            do {
                try await Task.sleep(for: .milliseconds(milliseconds))
            } catch {
                probe.didCancel()
                throw error
            }
            return HTTP2Response(status: 200, body: Data("slept".utf8))
        case "/goaway":
            request.goAwayAfterResponse(HTTP2GoAway(errorCode: 0, debugData: Data(#"{"reason":"Shutdown"}"#.utf8)))
            return HTTP2Response(status: 200, body: Data("bye".utf8))
        default:
            return HTTP2Response(status: 404)
        }
    }
}

/// Starts a server on 127.0.0.1, port 0, with the test handler.
func startServer(
    tls: HTTP2ServerConfiguration.TLS?, probe: Probe = Probe(),
    configure: (inout HTTP2ServerConfiguration) -> Void = { _ in }
) throws -> HTTP2Server {
    var configuration = HTTP2ServerConfiguration(host: "127.0.0.1", port: 0, tls: tls)
    configure(&configuration)
    let server = HTTP2Server(configuration: configuration, handler: testHandler(probe))
    try server.start()
    return server
}

/// Connects to 127.0.0.1:`port`, sends `bytes`, and reports whether the server closed the
/// connection (end of file or reset) within `seconds`.
func serverClosesAfterSending(_ bytes: [UInt8], port: Int, seconds: Int = 10) async -> Bool {
    await withCheckedContinuation { continuation in
        Thread {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard connected == 0 else { return continuation.resume(returning: false) }
            var timeout = timeval(tv_sec: seconds, tv_usec: 0)
            _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count > 0 { continue }
                if count == 0 || errno == ECONNRESET { return continuation.resume(returning: true) }
                return continuation.resume(returning: false)  // timed out: still open
            }
        }.start()
    }
}
