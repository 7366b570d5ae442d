import APNsSimulator
import Foundation
import OpenSSLCrypto
import TestSupport
import Testing

/// `mail-client` as a process, against mailboxd and apns-sim in this process.
@Suite("mail-client executable", .serialized)
struct MailClientTests {
    static var binary: String {
        get throws {
            let path = TestEnvironment.executable("mail-client").path
            guard FileManager.default.isExecutableFile(atPath: path) else {
                throw TestServerError("mail-client not built at \(path): run swift build first")
            }
            return path
        }
    }

    /// The JSON event lines printed so far.
    static func events(_ output: String) -> [[String: Any]] {
        output.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    static func events(_ child: ChildProcess, named name: String) -> [[String: Any]] {
        events(child.output).filter { $0["event"] as? String == name }
    }

    /// Runs `mail-client` to completion, off the cooperative pool (the service in this process needs it).
    static func run(
        _ arguments: [String], input: String? = nil, environment: [String: String]? = nil
    ) async throws -> ProcessResult {
        try await offPool { try Subprocess.run(try binary, arguments, input: input, environment: environment) }
    }

    /// Waits, off the cooperative pool, until the client's output satisfies `predicate`.
    static func wait(
        _ client: ChildProcess, timeout: Double = 10, _ predicate: @escaping @Sendable (String) -> Bool
    ) async throws -> Bool {
        try await offPool { client.waitForOutput(timeout: timeout, predicate) }
    }

    /// `mail-client send` with the delivery token: the message's `{id, state}`.
    static func send(_ backend: InProcessMailboxd, subject: String, body: String) async throws -> [String: Any] {
        let tokenFile = backend.directory.path("delivery-token")
        try "\(InProcessMailboxd.deliveryToken)\n".write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let bodyFile = backend.directory.path("body.txt")
        try body.write(toFile: bodyFile, atomically: true, encoding: .utf8)
        let result = try await run([
            "send", "--server", backend.baseURL, "--delivery-token-file", tokenFile, "--to", "alice", "--from",
            "bob@example.com", "--subject", subject, "--body-file", bodyFile,
        ])
        guard result.status == 0,
            let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        else { throw TestServerError("send failed: \(result.stdout) \(result.stderr)") }
        return object
    }

    func startClient(
        _ backend: InProcessMailboxd, stateDir: String, extra: [String] = [],
        password: String = InProcessMailboxd.password
    ) throws -> ChildProcess {
        try ChildProcess(
            try Self.binary,
            [
                "run", "--server", backend.baseURL, "--sim", backend.simURL, "--username", "alice", "--state-dir",
                stateDir, "--device-name", "test-device",
            ] + extra,
            stdin: password + "\n", logDirectory: backend.directory.url.path)
    }

    /// `--transport urlsession`, as an app ships it, in a fleet beside a libcurl device: FoundationNetworking trusts
    /// the system store only, so the dev CA goes there, in a mount namespace of the fleet's own (`unshare -m`, a bind
    /// mount over the bundle), never for the machine; the libcurl device trusts it through `--ca`.
    @Test("a URLSession device in a mixed fleet trusts the dev CA in the system store and converges with the rest")
    func aDeviceOnURLSessionConvergesInAMixedFleet() async throws {
        let authority = try DevCertificates.makeCertificateAuthority(commonName: "mail-client URLSession CA")
        let server = try DevCertificates.makeServerCertificate(hosts: ["127.0.0.1", "localhost"], signedBy: authority)
        let backend = try await InProcessMailboxd(tls: (server.certificatePEM, server.privateKeyPEM))
        let bundle = backend.directory.path("ca-certificates.crt")
        let system = "/etc/ssl/certs/ca-certificates.crt"
        let trusted = (try? String(contentsOfFile: system, encoding: .utf8)) ?? ""
        try (trusted + "\n" + authority.certificatePEM).write(toFile: bundle, atomically: true, encoding: .utf8)
        let caFile = backend.directory.path("dev-ca.pem")
        try authority.certificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        _ = try await backend.deliver(subject: "before launch")
        let state = try TemporaryDirectory()
        let password = InProcessMailboxd.password
        let fleet = try ChildProcess(
            "/usr/bin/unshare",
            [
                "--mount", "sh", "-c", "mount --bind \"$0\" \(system) && exec \"$@\"", bundle, try Self.binary,
                "fleet", "--server", backend.baseURL, "--ca", caFile, "--sim", backend.simURL, "--state-dir",
                state.path("fleet"), "--fallback-interval", "0",
            ],
            stdin: "on-curl alice \(password) apns\non-urlsession alice \(password) apns urlsession\n",
            logDirectory: backend.directory.url.path)
        let devices = ["on-curl", "on-urlsession"]
        @Sendable func synced(_ output: String, _ device: String, to state: String?) -> Bool {
            Self.events(output).contains {
                $0["event"] as? String == "sync-done" && $0["device"] as? String == device
                    && (state == nil || $0["state"] as? String == state)
            }
        }
        #expect(
            try await Self.wait(fleet, timeout: 20) { output in devices.allSatisfy { synced(output, $0, to: nil) } },
            "\(fleet.output) \(fleet.errorOutput)")
        let tokens = Set(Self.events(fleet, named: "registered").compactMap { $0["deviceToken"] as? String })
        #expect(tokens.count == 2, "each device registered a token of its own")
        _ = try await backend.deliver(subject: "one")
        _ = try await backend.deliver(subject: "two")
        let latest = try await backend.mailbox().state
        #expect(
            try await Self.wait(fleet, timeout: 20) { output in devices.allSatisfy { synced(output, $0, to: latest) } },
            "\(fleet.output) \(fleet.errorOutput)")
        let signals = Self.events(fleet, named: "signal").compactMap { $0["device"] as? String }
        #expect(signals.contains("on-urlsession"), "the URLSession device synced after a signal, not a timer")
        let status = try await offPool { fleet.stop(signal: SIGTERM) }
        #expect(status == 0, "exit status \(status): \(fleet.errorOutput)")
        for device in devices {
            let dump = try await Self.run(["dump", "--state-dir", state.path("fleet") + "/" + device])
            let cache = try #require(
                try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
            #expect(cache["state"] as? String == latest && cache["messageCount"] as? Int == 3, "\(device): \(cache)")
        }
    }

    @Test("registers, syncs on launch and on signals, recovers from 401, matches the server, exits on SIGTERM")
    func fullLifecycle() async throws {
        let backend = try await InProcessMailboxd()
        let state = try TemporaryDirectory()
        _ = try await Self.send(backend, subject: "before launch", body: "hello")
        let client = try startClient(backend, stateDir: state.path("client"), extra: ["--fallback-interval", "0"])
        #expect(try await Self.wait(client) { $0.contains("\"sync-done\"") && $0.contains("\"stream\"") })
        let registered = try #require(Self.events(client, named: "registered").first)
        let token = try #require(registered["deviceToken"] as? String)
        #expect(token.count == 64)
        #expect(try await backend.mailbox().devices == [token])
        let launch = try #require(Self.events(client, named: "sync-done").first)
        #expect(
            launch["messages"] as? Int == 1 && launch["full"] as? Bool == true
                && launch["trigger"] as? String == "launch")

        let receipt = try await Self.send(backend, subject: "big", body: String(repeating: "z", count: 20_000))
        _ = try await Self.send(backend, subject: "third", body: "three")
        let done = try await Self.wait(client, timeout: 20) { output in
            Self.events(output).contains { $0["event"] as? String == "sync-done" && $0["messages"] as? Int == 3 }
        }
        #expect(done)
        let signal = try #require(Self.events(client, named: "signal").first)
        let payload = try #require(signal["payload"] as? [String: Any])
        #expect(payload["st"] is String && payload["aps"] is [String: Any])
        #expect(Self.events(client, named: "badge").first?["badge"] is Int)
        let syncDone = Self.events(client, named: "sync-done")
        #expect(syncDone.allSatisfy { $0["ms"] is Int && $0["created"] is Int && $0["state"] is String })

        // The token stops working (the session outlives its idle timeout; the device stays registered and is still
        // signalled): the sync reports 401, the client logs in again and catches up.
        backend.clock.skip(31 * 86_400)
        _ = try await Self.send(backend, subject: "after expiry", body: "four")
        #expect(
            try await Self.wait(client, timeout: 20) { output in
                Self.events(output).contains { $0["event"] as? String == "sync-done" && $0["messages"] as? Int == 4 }
            })
        #expect(Self.events(client, named: "error").contains { $0["code"] as? String == "unauthorized" })

        #expect(try await backend.mailbox().devices == [token])
        let status = try await offPool { client.stop(signal: SIGTERM) }
        #expect(status == 0, "exit status \(status): \(client.errorOutput)")
        #expect(Self.events(client, named: "exit").first?["reason"] as? String == "signal")
        #expect(try await backend.mailbox().devices.isEmpty)

        let dump = try await Self.run(["dump", "--state-dir", state.path("client")])
        #expect(dump.status == 0)
        let cache = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        let server = try await backend.mailbox()
        #expect(cache["state"] as? String == server.state && cache["messageCount"] as? Int == 4)
        let cachedMessages = try #require(cache["messages"] as? [[String: Any]])
        #expect(Set(cachedMessages.compactMap { $0["id"] as? String }) == Set(server.messageIDs))
        let big = try #require(cachedMessages.first { $0["id"] as? String == receipt["id"] as? String })
        #expect(big["body"] == nil && big["size"] as? Int == 20_000)
        // Nothing secret or content-bearing in the event stream's errors.
        #expect(!client.output.contains("secret") && !client.errorOutput.contains("secret"))
    }

    @Test("--live: syncs on the server's events without signals; a stream refused after revocation logs in again")
    func liveMode() async throws {
        let backend = try await InProcessMailboxd()
        let state = try TemporaryDirectory()
        let client = try startClient(
            backend, stateDir: state.path("client"), extra: ["--live", "--fallback-interval", "0"])
        defer { client.stop() }
        @Sendable func serverStreams(_ output: String) -> Int {
            Self.events(output).filter { $0["event"] as? String == "stream" && $0["source"] as? String == "server" }
                .count
        }
        @Sendable func synced(_ output: String, messages: Int) -> [String: Any]? {
            Self.events(output).first {
                $0["event"] as? String == "sync-done" && $0["messages"] as? Int == messages
                    && $0["outcome"] as? String == "completed"
            }
        }
        #expect(try await Self.wait(client) { serverStreams($0) == 1 && synced($0, messages: 0) != nil })
        // apns-sim accepts every push and delivers none.
        backend.simulator.gateway.setFaults(APNsFaults(SimulatorFaults(dropProbability: 1)))
        _ = try await Self.send(backend, subject: "no push for this one", body: "one")
        #expect(try await Self.wait(client) { synced($0, messages: 1) != nil })
        #expect(synced(client.output, messages: 1)?["trigger"] as? String == "change")

        // The account is signed out everywhere and the service restarted (its streams end): reopening the stream
        // gets 401, a sync finds the session gone and logs in again, and the stream is reopened with the new token.
        try await backend.store.revokeAllSessions(accountID: backend.accountID)
        try await backend.restart()
        #expect(try await Self.wait(client, timeout: 20) { serverStreams($0) == 2 }, "\(client.output)")
        #expect(Self.events(client, named: "error").contains { $0["code"] as? String == "unauthorized" })
        _ = try await Self.send(backend, subject: "on the reopened stream", body: "two")
        #expect(try await Self.wait(client) { synced($0, messages: 2) != nil })
        #expect(synced(client.output, messages: 2)?["trigger"] as? String == "change")
        #expect(client.isRunning)
        // The access log has a stream once it ends: the service stops, ending the one open now.
        await backend.stop()
        let opened = backend.requests.filter { $0.path == "/jmap/eventsource" }
        #expect(opened.count >= 3 && opened.contains { $0.status == 401 } && opened.last?.status == 200)
    }

    @Test("lost signals: the fallback timer converges, and --until-messages exits 0")
    func fallbackTimer() async throws {
        let backend = try await InProcessMailboxd()
        let state = try TemporaryDirectory()
        // apns-sim accepts every push and delivers none.
        backend.simulator.gateway.setFaults(APNsFaults(SimulatorFaults(dropProbability: 1)))
        let client = try startClient(
            backend, stateDir: state.path("client"),
            extra: ["--fallback-interval", "0.2", "--until-messages", "2", "--timeout", "30"])
        #expect(try await Self.wait(client) { $0.contains("\"sync-done\"") })
        _ = try await Self.send(backend, subject: "one", body: "1")
        _ = try await Self.send(backend, subject: "two", body: "2")
        let status = try await offPool { client.waitForExit() }
        #expect(status == 0, "exit status \(status): \(client.output) \(client.errorOutput)")
        #expect(Self.events(client, named: "signal").isEmpty)
        #expect(Self.events(client, named: "sync-start").contains { $0["trigger"] as? String == "timer" })
        #expect(Self.events(client, named: "exit").last?["reason"] as? String == "converged")
    }

    @Test("--once syncs without push; update, mark-read and delete change the server; wrong passwords fail")
    func onceAndActions() async throws {
        let backend = try await InProcessMailboxd()
        let state = try TemporaryDirectory()
        let first = try await Self.send(backend, subject: "one", body: "1")
        _ = try await Self.send(backend, subject: "two", body: "2")
        let id = try #require(first["id"] as? String)
        let common = ["--server", backend.baseURL, "--username", "alice"]
        let marked = try await Self.run(
            ["mark-read", "--message-id", id] + common, input: InProcessMailboxd.password + "\n")
        #expect(marked.status == 0 && marked.stdout.contains("\"seen\":true"))
        let moved = try await Self.run(
            ["update", "--message-id", id, "--mailbox", "archive", "--flagged", "true"] + common,
            input: InProcessMailboxd.password + "\n")
        #expect(moved.stdout.contains("\"mailbox\":\"archive\"") && moved.stdout.contains("\"flagged\":true"))
        let wrong = try await Self.run(["mark-read", "--message-id", id] + common, input: "nope\n")
        #expect(wrong.status == 1 && wrong.stdout.contains("invalidCredentials"))

        let once = try await Self.run(
            ["run", "--once", "--state-dir", state.path("c")] + common, input: InProcessMailboxd.password + "\n")
        #expect(once.status == 0, "\(once.stdout) \(once.stderr)")
        #expect(once.stdout.contains("\"sync-done\"") && once.stdout.contains("\"messages\":2"))

        let deleted = try await Self.run(
            ["delete", "--message-id", id] + common, input: InProcessMailboxd.password + "\n")
        #expect(deleted.status == 0 && deleted.stdout.contains("\"deleted\":true"))
        let again = try await Self.run(
            ["run", "--once", "--state-dir", state.path("c")] + common, input: InProcessMailboxd.password + "\n")
        let done = try #require(Self.events(again.stdout).first { $0["event"] as? String == "sync-done" })
        #expect(done["messages"] as? Int == 1 && done["destroyed"] as? Int == 1 && done["full"] as? Bool == false)
        let dump = try await Self.run(["dump", "--state-dir", state.path("c")])
        #expect(dump.stdout.contains(try await backend.mailbox().state))
    }

    @Test("every subcommand has --help; flags come from MAIL_CLIENT_ variables; bad usage exits 2")
    func usage() throws {
        for command in ["run", "send", "mark-read", "update", "delete", "dump"] {
            let result = try Subprocess.run(try Self.binary, [command, "--help"])
            #expect(result.status == 0 && result.stdout.contains("usage: mail-client \(command)"))
        }
        #expect(try Subprocess.run(try Self.binary, ["--help"]).status == 0)
        #expect(try Subprocess.run(try Self.binary, ["bogus"]).status == 2)
        #expect(try Subprocess.run(try Self.binary, ["send", "--nope", "x"]).status == 2)
        let state = try TemporaryDirectory()
        let fromEnvironment = try Subprocess.run(
            try Self.binary, ["dump"], environment: ["MAIL_CLIENT_STATE_DIR": state.path("missing")])
        #expect(fromEnvironment.status == 2 && fromEnvironment.stderr.contains("no cache in"))
    }
}
