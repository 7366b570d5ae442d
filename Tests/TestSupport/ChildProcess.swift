import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A long-running child process for tests (a server under test, a peer program), started with
/// `posix_spawn` and a clean signal mask.
///
/// Threads of the test runner block SIGTERM and SIGINT, and `Foundation.Process` children inherit that mask,
/// so they would ignore `terminate()`. Children started here get default signal handling. Standard output
/// and standard error go to files, so a chatty child never blocks on a full pipe.
public final class ChildProcess: @unchecked Sendable {  // `lock` guards `exitStatus`
    /// The child's process id.
    public let pid: pid_t
    /// The file receiving the child's standard output.
    public let stdoutPath: String
    /// The file receiving the child's standard error.
    public let stderrPath: String
    private let lock = NSLock()
    private var exitStatus: Int32?

    /// Starts `executable` with `arguments`; `environment` entries are added to the current environment.
    /// `stdin`, when given, is written to a file that becomes the child's standard input.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], stdin: String? = nil,
        logDirectory: String = NSTemporaryDirectory()
    ) throws {
        let tag = "\(URL(fileURLWithPath: executable).lastPathComponent)-\(UUID().uuidString.prefix(8))"
        stdoutPath = "\(logDirectory)/\(tag).out"
        stderrPath = "\(logDirectory)/\(tag).err"
        let stdinPath = "\(logDirectory)/\(tag).in"
        try (stdin ?? "").write(toFile: stdinPath, atomically: true, encoding: .utf8)

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, stdinPath, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let env = ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { "\($0.key)=\($0.value)" }
        let argv = [executable] + arguments
        var cArgs = argv.map { strdup($0) } + [nil]
        var cEnv = env.map { strdup($0) } + [nil]
        defer {
            cArgs.forEach { free($0) }
            cEnv.forEach { free($0) }
        }
        var child: pid_t = 0
        let rc = posix_spawn(&child, executable, &actions, &attributes, &cArgs, &cEnv)
        guard rc == 0 else {
            throw NSError(
                domain: "ChildProcess", code: Int(rc),
                userInfo: [NSLocalizedDescriptionKey: "cannot start \(executable): \(String(cString: strerror(rc)))"])
        }
        pid = child
    }

    deinit { _ = stop(signal: SIGKILL) }

    /// Everything the child has written to standard output so far.
    public var output: String { Self.read(stdoutPath) }
    /// Everything the child has written to standard error so far.
    public var errorOutput: String { Self.read(stderrPath) }

    /// A file's text, read with `read(2)`: Foundation's file reading (`String(contentsOfFile:)`,
    /// `Data(contentsOf:)`, `FileManager.contents(atPath:)`) leaks a 4 KiB buffer for every empty file it reads
    /// in this toolchain, and a child's log is often still empty.
    public static func read(_ path: String) -> String {
        String(decoding: readBytes(path), as: UTF8.self)
    }

    /// A file's bytes, read with `read(2)` (see ``read(_:)``); empty when it cannot be read.
    public static func readBytes(_ path: String) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return [] }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            bytes += chunk[0..<count]
        }
        return bytes
    }

    /// Whether the child is still running (reaps it when it has ended).
    public var isRunning: Bool { poll() == nil }

    private func poll() -> Int32? {
        lock.withLock {
            if let exitStatus { return exitStatus }
            var status: Int32 = 0
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid {
                exitStatus = status
                return status
            }
            if result < 0 {
                exitStatus = -1
                return -1
            }
            return nil
        }
    }

    /// Sends `signal` and waits up to `timeout` seconds for the child to end (then SIGKILLs it).
    /// Returns the raw wait status.
    @discardableResult
    public func stop(signal: Int32 = SIGTERM, timeout: Double = 10) -> Int32 {
        if let status = poll() { return status }
        kill(pid, signal)
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let status = poll() { return status }
            usleep(10_000)
        }
        kill(pid, SIGKILL)
        return waitForExit()
    }

    /// Waits until the child ends and returns the raw wait status.
    @discardableResult
    public func waitForExit() -> Int32 {
        while true {
            if let status = poll() { return status }
            usleep(10_000)
        }
    }

    /// Waits up to `timeout` seconds until `predicate` holds on the child's standard output.
    public func waitForOutput(timeout: Double = 10, _ predicate: (String) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if predicate(output) { return true }
            if !isRunning { return predicate(output) }
            usleep(20_000)
        }
        return false
    }
}

/// Waits until a TCP connection to `host:port` succeeds, up to `timeout` seconds.
public func waitForPort(_ port: UInt16, host: String = "127.0.0.1", timeout: Double = 10) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = inet_addr(host)
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        close(fd)
        if connected { return true }
        usleep(20_000)
    }
    return false
}

/// Runs blocking work (starting processes, blocking sockets, waiting for ports) on a thread of its own, so the
/// cooperative thread pool — as wide as the cores, two here — keeps running the test's other tasks.
public func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
    }
}

/// Runs `executable` to completion off the cooperative pool, with `environment` added to this process's.
public func runTool(
    _ executable: String, _ arguments: [String], environment: [String: String] = [:]
) async throws -> ProcessResult {
    try await offPool {
        let directory = try TemporaryDirectory(prefix: "tool")
        let child = try ChildProcess(executable, arguments, environment: environment, logDirectory: directory.url.path)
        let status = child.waitForExit()
        let signaled = status & 0x7f != 0
        return ProcessResult(
            status: signaled ? status & 0x7f : (status >> 8) & 0xff, terminatedBySignal: signaled,
            stdout: child.output, stderr: child.errorOutput)
    }
}

/// The path of `name` on PATH; a missing tool fails the test with a message naming it.
public func requireTool(_ name: String) throws -> String {
    guard let path = Subprocess.which(name) else { throw HarnessError("\(name) is required on PATH for this test") }
    return path
}

/// A test harness's own failure: what it needed and did not get.
public struct HarnessError: Error, CustomStringConvertible {
    /// What went wrong, for the test's failure message.
    public var description: String
    /// An error saying `description`.
    public init(_ description: String) { self.description = description }
}

extension ChildProcess {
    /// Waits (up to `timeout`) for the line starting with `prefix` that a server started on port 0 writes to
    /// standard error, and returns the ports it names: `name=HOST:PORT` fields under their name, a URL
    /// (`scheme://HOST:PORT/…`) under `"url"`. The bound ports are read back, never picked before the server binds
    /// them (a port picked and released can be taken by another process first). A bare `HOST:PORT` field is
    /// `"address"`.
    public func listeningPorts(prefix: String, timeout: TimeInterval = 20) throws -> [String: UInt16] {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let text = errorOutput
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) {
                return Self.ports(in: line)
            }
            guard isRunning else { break }
            usleep(20_000)
        }
        throw HarnessError("no '\(prefix)' line: \(errorOutput)")
    }

    static func ports(in line: Substring) -> [String: UInt16] {
        var ports: [String: UInt16] = [:]
        for field in line.split(separator: " ") {
            if let scheme = field.range(of: "://") {
                let authority = field[scheme.upperBound...].prefix { $0 != "/" }
                if ports["url"] == nil, let port = authority.split(separator: ":").last.flatMap({ UInt16($0) }) {
                    ports["url"] = port
                }
            } else if let equals = field.firstIndex(of: "=") {
                let value = field[field.index(after: equals)...]
                if let port = value.split(separator: ":").last.flatMap({ UInt16($0) }) {
                    ports[String(field[..<equals])] = port
                }
            } else if field.contains(":"), let port = field.split(separator: ":").last.flatMap({ UInt16($0) }) {
                ports["address"] = port
            }
        }
        return ports
    }
}
