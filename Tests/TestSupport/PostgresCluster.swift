import Foundation

/// A throwaway highly available PostgreSQL for one test (`Scripts/postgres-cluster`): a pg_auto_failover monitor, a
/// primary and a synchronous standby on three consecutive free loopback ports, stopped by their pids and removed
/// when released, or when the test process ends without releasing it (``ServerWatchdog``).
public final class PostgresCluster: Sendable {
    /// The cluster's directory.
    public let directory: String
    /// The multi-host URL (`postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/signalfetch?target_session_attrs=…`).
    public let url: String

    /// Starts the cluster and waits until its standby is synchronous.
    public init() throws {
        directory =
            FileManager.default.temporaryDirectory.appendingPathComponent(
                "signalfetch-ha-\(UUID().uuidString.prefix(8))"
            ).path
        let base = freeLocalPorts(length: 3)
        watchdog = try ServerWatchdog(script: "Scripts/postgres-cluster", directory: directory)
        do {
            url = try Self.run("start", directory, "--port-base", String(base))
        } catch {
            _ = try? Self.script(["stop", directory])
            throw error
        }
    }

    private let watchdog: ServerWatchdog

    deinit {
        _ = try? Self.script(["stop", directory])
        try? FileManager.default.removeItem(atPath: directory)
        watchdog.release()
    }

    /// The cluster as its monitor sees it.
    public struct Status: Decodable, Sendable, Equatable {
        /// `HOST:PORT` of the primary, when there is one.
        public let primary: String?
        /// `HOST:PORT` of each streaming standby.
        public let standbys: [String]
        /// Whether the primary waits for a standby at each commit.
        public let synchronous: Bool
    }

    /// The cluster's state.
    public func status() throws -> Status {
        try JSONDecoder().decode(Status.self, from: Data(Self.run("status", directory).utf8))
    }

    /// SIGKILLs the primary's postmaster and its keeper; returns its `HOST:PORT`.
    @discardableResult
    public func killPrimary() throws -> String { try Self.run("kill-primary", directory) }

    /// Brings the killed node back as a standby and waits until it is synchronous again.
    public func rejoin() throws { _ = try Self.run("rejoin", directory) }

    /// The URL of the current primary alone (for administration: `psql`, `ALTER SYSTEM`).
    public func primaryURL() throws -> String {
        guard let primary = try status().primary else { throw PostgresServerError("the cluster has no primary") }
        return "postgresql://postgres@\(primary)/signalfetch"
    }

    static func script(_ arguments: [String]) throws -> ProcessResult {
        try runServerScript("Scripts/postgres-cluster", arguments)
    }

    /// Runs `Scripts/postgres-cluster COMMAND DIR …` and returns what it printed; a failure names the command and
    /// what the script said.
    static func run(_ arguments: String...) throws -> String {
        let result = try script(arguments)
        guard result.status == 0 else {
            throw PostgresServerError("postgres-cluster \(arguments[0]) failed: \(result.stderr)")
        }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
