import Foundation
import Locking
import PostgresKit

/// A throwaway PostgreSQL 15 cluster for this test process (`Scripts/postgres-instance`, on a free loopback
/// port, fsync off), started on first use and stopped, by its pid, when the process exits — also when it crashes or
/// is killed (``ServerWatchdog``). Each test takes a fresh database of its own with ``makeDatabase()``.
public final class PostgresServer: Sendable {
    /// The cluster's directory (data, log).
    public let directory: String
    /// The port it listens on, on 127.0.0.1.
    public let port: UInt16
    private let databases = LockedValue(0)
    private let watchdog: ServerWatchdog

    /// The process's cluster, started on first use. Fails (rather than skips) when PostgreSQL is missing:
    /// `Scripts/bootstrap` installs it.
    public static func shared() throws -> PostgresServer {
        // Started under a lock rather than in a `static let` initializer: the start runs a child process, and
        // Foundation's `Process` must not wait inside a one-time initializer.
        try running.withLock { server throws -> PostgresServer in
            if let server { return server }
            let started = try PostgresServer()
            server = started
            atexit { PostgresServer.stopShared() }
            return started
        }
    }

    private static let running = LockedValue<PostgresServer?>(nil)

    private static func stopShared() {
        guard let server = running.withLock({ $0 }) else { return }
        _ = try? server.script(["stop", server.directory, "--immediate"])
        try? FileManager.default.removeItem(atPath: server.directory)
    }

    /// A cluster of the caller's own (for a test that stops and starts the server), stopped when released.
    public static func dedicated() throws -> PostgresServer {
        let server = try PostgresServer()
        server.stopsWhenReleased.withLock { $0 = true }
        return server
    }

    private let stopsWhenReleased = LockedValue(false)

    deinit {
        guard stopsWhenReleased.withLock({ $0 }) else { return }
        _ = try? script(["stop", directory, "--immediate"])
        try? FileManager.default.removeItem(atPath: directory)
        watchdog.release()
    }

    private init() throws {
        directory =
            FileManager.default.temporaryDirectory.appendingPathComponent(
                "signalfetch-pg-\(UUID().uuidString.prefix(8))"
            ).path
        port = freeLocalPort()
        watchdog = try ServerWatchdog(
            script: "Scripts/postgres-instance", directory: directory, stopArguments: ["--immediate"])
        let result = try script(["start", directory, "--port", String(port), "--fast"])
        guard result.status == 0 else {
            throw PostgresServerError("PostgreSQL did not start: \(result.stderr)")
        }
    }

    /// The URL of the `postgres` database (for administration).
    public var adminURL: String { "postgresql://postgres@127.0.0.1:\(port)/postgres" }

    /// Creates a new, empty database and returns its URL.
    public func makeDatabase() throws -> String {
        let number = databases.withLock {
            $0 += 1
            return $0
        }
        let name = "t\(getpid())_\(number)"
        let admin = try PostgresConnection(url: adminURL)
        try admin.execute("CREATE DATABASE \(name)")
        return "postgresql://postgres@127.0.0.1:\(port)/\(name)"
    }

    /// Stops the server (fast shutdown: connections are ended) and starts it again on the same port.
    public func restart() throws {
        let result = try script(["restart", directory])
        guard result.status == 0 else { throw PostgresServerError("restart failed: \(result.stderr)") }
    }

    /// Stops the server until ``start()``.
    public func stop() throws {
        let result = try script(["stop", directory])
        guard result.status == 0 else { throw PostgresServerError("stop failed: \(result.stderr)") }
    }

    /// Starts the server stopped by ``stop()``.
    public func start() throws {
        let result = try script(["start", directory, "--port", String(port), "--fast"])
        guard result.status == 0 else { throw PostgresServerError("start failed: \(result.stderr)") }
    }

    private func script(_ arguments: [String]) throws -> ProcessResult {
        try runServerScript("Scripts/postgres-instance", arguments)
    }
}

/// Runs one of the project's server scripts (`Scripts/postgres-instance`, `Scripts/postgres-cluster`) to completion.
/// A `ChildProcess` rather than `Subprocess`: the servers it starts must get default signal handling (pg_ctl stops
/// them with SIGINT), and its exit is awaited with `waitpid`.
func runServerScript(_ script: String, _ arguments: [String]) throws -> ProcessResult {
    let child = try ChildProcess(TestEnvironment.packageRoot.appendingPathComponent(script).path, arguments)
    let raw = child.waitForExit()
    let signalled = raw & 0x7f != 0
    let status = signalled ? 128 + (raw & 0x7f) : (raw >> 8) & 0xff
    defer {
        try? FileManager.default.removeItem(atPath: child.stdoutPath)
        try? FileManager.default.removeItem(atPath: child.stderrPath)
    }
    return ProcessResult(
        status: status, terminatedBySignal: signalled, stdout: child.output, stderr: child.errorOutput)
}

/// Why the test cluster could not be used.
public struct PostgresServerError: Error, CustomStringConvertible {
    /// What went wrong.
    public let description: String
    init(_ description: String) { self.description = description }
}

/// Stops a server a test started through one of the project's scripts when this process ends without doing so (a
/// crash, SIGKILL, a test run cut short, a test object never released): a shell in a session of its own waits on a
/// socket whose other end only this process holds (close-on-exec, so no child inherits it). When the process goes,
/// the kernel closes that end and the shell runs `SCRIPT stop DIR` and removes the directory. After an orderly stop
/// the shell's stop finds nothing to do.
struct ServerWatchdog: Sendable {
    let pid: pid_t
    let writeEnd: Int32

    /// Watches the server `script` (`Scripts/postgres-instance` or `Scripts/postgres-cluster`) runs in `directory`;
    /// `stopArguments` follow the directory in the stop command.
    init(script: String, directory: String, stopArguments: [String] = []) throws {
        var ends: [Int32] = [0, 0]
        // A socket pair rather than a pipe: it can be made close-on-exec at once, with no moment in which another
        // thread's child could inherit it.
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            throw PostgresServerError("socketpair: errno \(errno)")
        }
        defer { close(ends[0]) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, ends[0], 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let path = TestEnvironment.packageRoot.appendingPathComponent(script).path
        // setsid: a session of its own, so a terminal's Ctrl-C to the test run does not end it before it acts.
        let argv =
            [
                "/usr/bin/setsid", "/bin/sh", "-c", #"cat >/dev/null; d=$1; shift; "$0" stop "$d" "$@"; rm -rf "$d""#,
                path, directory,
            ] + stopArguments
        var cArgs = argv.map { strdup($0) } + [nil]
        defer { cArgs.forEach { free($0) } }
        var child: pid_t = 0
        let status = posix_spawn(&child, argv[0], &actions, nil, &cArgs, environ)
        guard status == 0 else {
            close(ends[1])
            throw PostgresServerError("the PostgreSQL watchdog did not start: errno \(status)")
        }
        pid = child
        writeEnd = ends[1]
    }

    /// Lets the watchdog go (its cluster was stopped in an orderly way) and reaps it.
    func release() {
        close(writeEnd)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
    }
}
