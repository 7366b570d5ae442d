import Foundation
import HTTPClient
import TestSupport

/// Errors raised while setting up a peer program for a test.
struct TestSetupError: Error, CustomStringConvertible {
    let description: String
}

/// A peer program started for one test and killed when released.
final class ServerProcess {
    let process: Process
    let port: UInt16

    private init(process: Process, port: UInt16) {
        self.process = process
        self.port = port
    }

    deinit {
        // SIGKILL: a child started from the test runner inherits a signal mask that blocks SIGTERM.
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// Starts the Python echo server (`Tests/Peers/http_echo_server.py`) and reads the port it prints.
    static func echoServer() throws -> ServerProcess {
        let python = TestEnvironment.python
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw TestSetupError(description: "Python not found at \(python); set SIGNALFETCH_PYTHON")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = ["-u", TestEnvironment.peer("http_echo_server.py")]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        var started = false
        defer {
            if !started {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
        }
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            guard !byte.isEmpty else {
                throw TestSetupError(description: "echo server exited before printing its port")
            }
            line.append(byte)
        }
        guard let port = UInt16(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        else { throw TestSetupError(description: "echo server printed no port") }
        started = true
        return ServerProcess(process: process, port: port)
    }

    /// Starts `nghttpd` serving `docroot`: cleartext HTTP/2 (h2c) without `tls`, HTTP/2 over TLS with it.
    static func nghttpd(
        docroot: String, tls: (key: String, certificate: String)? = nil, extraArguments: [String] = [],
        port fixedPort: UInt16? = nil
    ) throws -> ServerProcess {
        guard let executable = Subprocess.which("nghttpd") else {
            throw TestSetupError(description: "nghttpd not found on PATH (Debian package nghttp2-server)")
        }
        for _ in 0..<5 {
            let port = fixedPort ?? freeLocalPort()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            var arguments = ["-a", "127.0.0.1", "-d", docroot] + extraArguments
            if let tls {
                arguments += [String(port), tls.key, tls.certificate]
            } else {
                arguments += ["--no-tls", String(port)]
            }
            process.arguments = arguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let server = ServerProcess(process: process, port: port)
            if waitUntilListening(port: port, process: process) { return server }
        }
        throw TestSetupError(description: "nghttpd did not start listening")
    }

    private static func waitUntilListening(port: UInt16, process: Process) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline && process.isRunning {
            if canConnect(port: port) { return true }
            usleep(20_000)
        }
        return false
    }

    private static func canConnect(port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return result == 0
    }
}

/// A throw-away certificate authority and a server certificate for 127.0.0.1 and localhost, made with the
/// `openssl` command-line tool (P-256 keys).
struct TestCertificates {
    let caCertificate: String
    let serverCertificate: String
    let serverKey: String
    /// The base64 SHA-256 of the server key's DER SubjectPublicKeyInfo.
    let serverPin: String

    static func make(
        in directory: TemporaryDirectory, name: String = "test", subjectAltName: String = "IP:127.0.0.1,DNS:localhost"
    ) throws -> TestCertificates {
        guard let openssl = Subprocess.which("openssl") else {
            throw TestSetupError(description: "openssl not found on PATH")
        }
        func run(_ arguments: [String]) throws {
            let result = try Subprocess.run(openssl, arguments)
            guard result.status == 0 else {
                throw TestSetupError(description: "openssl \(arguments.first ?? "") failed: \(result.stderr)")
            }
        }
        let caKey = directory.path("\(name)-ca.key")
        let caCertificate = directory.path("\(name)-ca.pem")
        let serverKey = directory.path("\(name)-server.key")
        let serverRequest = directory.path("\(name)-server.csr")
        let serverCertificate = directory.path("\(name)-server.pem")
        let extensions = directory.path("\(name)-server.ext")
        try run(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", caKey])
        try run([
            "req", "-x509", "-new", "-key", caKey, "-sha256", "-days", "2", "-subj", "/CN=\(name) test CA",
            "-out", caCertificate,
        ])
        try run(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", serverKey])
        try run(["req", "-new", "-key", serverKey, "-subj", "/CN=localhost", "-out", serverRequest])
        try "subjectAltName=\(subjectAltName)\nextendedKeyUsage=serverAuth\n"
            .write(toFile: extensions, atomically: true, encoding: .utf8)
        try run([
            "x509", "-req", "-in", serverRequest, "-CA", caCertificate, "-CAkey", caKey, "-CAcreateserial",
            "-days", "2", "-sha256", "-extfile", extensions, "-out", serverCertificate,
        ])
        let publicKeyDER = directory.path("\(name)-server.spki.der")
        try run(["pkey", "-in", serverKey, "-pubout", "-outform", "DER", "-out", publicKeyDER])
        let digest = directory.path("\(name)-server.spki.sha256")
        try run(["dgst", "-sha256", "-binary", "-out", digest, publicKeyDER])
        let pin = try Data(contentsOf: URL(fileURLWithPath: digest)).base64EncodedString()
        return TestCertificates(
            caCertificate: caCertificate, serverCertificate: serverCertificate, serverKey: serverKey, serverPin: pin)
    }
}

/// What the echo server is busy with, from its `/stats`.
struct EchoStats: Decodable {
    /// `/sse-forever` responses it still writes.
    let openStreams: Int
    /// `/delay` requests it holds, not answered yet.
    let delaying: Int

    /// Asks the echo server at `base` through `client`.
    static func read(_ client: HTTPClient, base: String) async throws -> EchoStats {
        let response = try await client.execute(HTTPClient.Request(url: "\(base)/stats"))
        return try JSONDecoder().decode(EchoStats.self, from: response.body)
    }
}

/// The JSON the echo server answers `/echo` with.
struct EchoReply: Decodable {
    let method: String
    let path: String
    let headers: [[String]]
    let body: String

    func header(_ name: String) -> String? {
        headers.first { $0.first?.lowercased() == name.lowercased() }?.last
    }
}
