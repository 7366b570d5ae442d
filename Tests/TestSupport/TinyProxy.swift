import Foundation

/// Debian's `tinyproxy` on loopback, started by a test: an HTTP proxy that allows `CONNECT` to any port, with Basic
/// credentials when given. Its log holds each request line (`CONNECT host:port …`).
public final class TinyProxy: Sendable {
    /// The port it listens on (127.0.0.1).
    public let port: UInt16
    /// Its log file.
    public let logPath: String
    private let process: ChildProcess

    private init(port: UInt16, logPath: String, process: ChildProcess) {
        self.port = port
        self.logPath = logPath
        self.process = process
    }

    deinit { process.stop(signal: SIGKILL) }

    /// Starts a proxy writing its files in `directory`; on `port` when given (to start one again where an earlier
    /// one listened), else on a free one; its outgoing connections from `outgoingAddress` when given (tinyproxy's
    /// `Bind`: a service that serves only that address is reached only through the proxy).
    public static func start(
        in directory: String, port fixedPort: UInt16? = nil, credentials: (user: String, password: String)? = nil,
        outgoingAddress: String? = nil
    ) throws -> TinyProxy {
        guard let executable = Subprocess.which("tinyproxy") else {
            throw HarnessError("tinyproxy not found on PATH (Debian package tinyproxy)")
        }
        let logPath = directory + "/tinyproxy.log"
        for _ in 0..<5 {
            let port = fixedPort ?? freeLocalPort()
            var config = [
                "Port \(port)", "Listen 127.0.0.1", "Allow 127.0.0.1", "Timeout 30", "LogLevel Info",
                "LogFile \"\(logPath)\"", "MaxClients 50",
            ]
            if let credentials { config.append("BasicAuth \(credentials.user) \(credentials.password)") }
            if let outgoingAddress { config.append("Bind \(outgoingAddress)") }
            let configPath = directory + "/tinyproxy-\(port).conf"
            try (config.joined(separator: "\n") + "\n").write(toFile: configPath, atomically: true, encoding: .utf8)
            let process = try ChildProcess(executable, ["-d", "-c", configPath], logDirectory: directory)
            if waitForPort(port) { return TinyProxy(port: port, logPath: logPath, process: process) }
            process.stop(signal: SIGKILL)
        }
        throw HarnessError("tinyproxy did not start listening")
    }

    /// The proxy's URL, with credentials when given.
    public func url(credentials: (user: String, password: String)? = nil) -> String {
        "http://" + (credentials.map { "\($0.user):\($0.password)@" } ?? "") + "127.0.0.1:\(port)"
    }

    /// What it has logged so far.
    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Stops it at once (SIGKILL: connections through it break).
    public func kill() { process.stop(signal: SIGKILL) }
}
