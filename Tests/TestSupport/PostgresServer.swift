import Foundation
import Locking
import PostgresKit

/// A throwaway PostgreSQL 15 cluster for this test process (`Scripts/postgres-instance`, on a free loopback
/// port, fsync off), started on first use and stopped, by its pid, when the process exits. Each test takes a fresh
/// database of its own with ``makeDatabase()``.
public final class PostgresServer: Sendable {
    /// The cluster's directory (data, log).
    public let directory: String
    /// The port it listens on, on 127.0.0.1.
    public let port: UInt16
    private let databases = LockedValue(0)

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
    }

    private init() throws {
        directory =
            FileManager.default.temporaryDirectory.appendingPathComponent(
                "signalfetch-pg-\(UUID().uuidString.prefix(8))"
            ).path
        port = freeLocalPort()
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
