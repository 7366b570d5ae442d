import Foundation
import TestSupport
import Testing

/// `mail-client run|fleet --live` with real mailboxd and apns-sim processes: an awake device follows the server's
/// event stream and syncs each change at once, even when its push is held back; when the stream is cut it falls
/// back to pushes, reconnects and converges.
@Suite("mail-client --live", .serialized)
struct LiveClientTests {
    /// The event lines a client printed so far, parsed.
    static func events(_ output: String) -> [[String: Any]] {
        output.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// Waits (off the cooperative pool) until `predicate` holds on the client's events; returns whether it did.
    /// `timeout` only guards against an event that never comes.
    func waitFor(
        _ client: ChildProcess, timeout: Double = 30, _ predicate: @escaping @Sendable ([[String: Any]]) -> Bool
    ) async throws -> Bool {
        try await offPool { client.waitForOutput(timeout: timeout) { predicate(Self.events($0)) } }
    }

    static func isServerStream(_ event: [String: Any]) -> Bool {
        event["event"] as? String == "stream" && event["source"] as? String == "server"
    }

    static func synced(_ event: [String: Any], messages: Int) -> Bool {
        event["event"] as? String == "sync-done" && event["messages"] as? Int == messages
            && event["outcome"] as? String == "completed"
    }

    /// Marks the simulated device reachable or not at apns-sim (offline: notifications are stored, not delivered).
    func setOnline(_ cluster: Cluster, token: String, _ online: Bool) async throws {
        let answer = try await cluster.call(
            .put, cluster.sim + "/sim/devices/\(token)/online", json: ["online": online])
        try #require([200, 204].contains(answer.status), "apns-sim online: \(answer.status)")
    }

    /// The device's stored notification count at apns-sim.
    func stored(_ cluster: Cluster, token: String) async throws -> Int? {
        let devices = try await cluster.call(.get, cluster.sim + "/sim/devices").body["devices"] as? [[String: Any]]
        return devices?.first { $0["token"] as? String == token }?["stored"] as? Int
    }

    @Test func aLiveDeviceSyncsAtOnceWithoutItsPushAndConvergesAcrossARestart() async throws {
        let cluster = try await Cluster.start()
        let client = try ChildProcess(
            TestEnvironment.executable("mail-client").path,
            [
                "run", "--live", "--server", cluster.api, "--ca", cluster.ca, "--sim", cluster.sim, "--username",
                "alice", "--state-dir", cluster.directory.path("alice-phone"), "--topic", Cluster.topic,
                "--fallback-interval", "0",
            ], stdin: "password-alice\n", logDirectory: cluster.directory.url.path)
        defer { client.stop() }
        // Registration itself signals the current state: once that signal is in, no other is on its way.
        let ready = try await waitFor(client) { events in
            events.contains(where: Self.isServerStream) && events.contains { Self.synced($0, messages: 0) }
                && events.contains { $0["event"] as? String == "signal" }
        }
        try #require(ready, "the client did not start: \(client.output) \(client.errorOutput)")
        let token = try #require(
            Self.events(client.output).first { $0["event"] as? String == "registered" }?["deviceToken"] as? String)

        // The push is held back (the device is offline at the gateway), yet the delivery is synced at once.
        try await setOnline(cluster, token: token, false)
        let signalsBefore = Self.events(client.output).filter { $0["event"] as? String == "signal" }.count
        _ = try await cluster.deliver(to: "alice", subject: "while the push waits", body: "b")
        let first = try await waitFor(client) { $0.contains { Self.synced($0, messages: 1) } }
        try #require(first, "the delivery was not synced: \(client.output)")
        let sync = try #require(Self.events(client.output).first { Self.synced($0, messages: 1) })
        #expect(sync["trigger"] as? String == "change")
        #expect(Self.events(client.output).filter { $0["event"] as? String == "signal" }.count == signalsBefore)
        #expect(try await stored(cluster, token: token) ?? 0 >= 1, "apns-sim holds the signal")

        // The stream is cut: mailboxd is killed and stays down while the client backs off, then comes back.
        try await setOnline(cluster, token: token, true)
        cluster.mailboxd.stop(signal: SIGKILL)
        let lost = try await waitFor(client) { events in
            events.contains { $0["code"] as? String == "changeStreamLost" }
        }
        #expect(lost, "no changeStreamLost event: \(client.output)")
        // It backs off while mailboxd is down: a reconnection attempt has failed.
        let retried = try await waitFor(client) { events in
            events.contains { $0["code"] as? String == "changeStreamLost" && $0["attempt"] as? Int ?? 0 >= 2 }
        }
        #expect(retried, "no failed reconnection while mailboxd was down: \(client.output)")
        try await offPool { try cluster.crashAndRestartMailboxd() }
        // Pushes drive the sync while the stream is still down, or the stream is back first: either way it converges.
        _ = try await cluster.deliver(to: "alice", subject: "after the restart", body: "b")
        let second = try await waitFor(client) { $0.contains { Self.synced($0, messages: 2) } }
        #expect(second, "the device did not converge after the restart: \(client.output)")
        let reconnected = try await waitFor(client, timeout: 40) { events in
            events.filter(Self.isServerStream).count >= 2
        }
        try #require(reconnected, "the event stream was not reopened: \(client.output)")

        // Followed again: with the push held back once more, the next delivery is synced at once.
        try await setOnline(cluster, token: token, false)
        _ = try await cluster.deliver(to: "alice", subject: "on the reopened stream", body: "b")
        let third = try await waitFor(client) { $0.contains { Self.synced($0, messages: 3) } }
        try #require(third, "the delivery after the reconnect was not synced: \(client.output)")
        #expect(Self.events(client.output).first { Self.synced($0, messages: 3) }?["trigger"] as? String == "change")
        #expect(client.isRunning)
    }

    @Test func aLiveFleetFollowsEachAccountsStream() async throws {
        let cluster = try await Cluster.start()
        let fleet = try ChildProcess(
            TestEnvironment.executable("mail-client").path,
            [
                "fleet", "--live", "--server", cluster.api, "--ca", cluster.ca, "--sim", cluster.sim, "--state-dir",
                cluster.directory.path("fleet"), "--topic", Cluster.topic, "--fallback-interval", "0",
            ], stdin: "alice-phone alice password-alice\nbob-phone bob password-bob\n",
            logDirectory: cluster.directory.url.path)
        defer { fleet.stop() }
        let names = ["alice-phone", "bob-phone"]
        let ready = try await waitFor(fleet, timeout: 60) { events in
            names.allSatisfy { name in
                events.contains { Self.isServerStream($0) && $0["device"] as? String == name }
                    && events.contains { Self.synced($0, messages: 0) && $0["device"] as? String == name }
            }
        }
        try #require(ready, "not every device follows its stream: \(fleet.output) \(fleet.errorOutput)")
        for event in Self.events(fleet.output) where event["event"] as? String == "registered" {
            try await setOnline(cluster, token: try #require(event["deviceToken"] as? String), false)
        }
        _ = try await cluster.deliver(to: "alice", subject: "for alice", body: "b")
        _ = try await cluster.deliver(to: "bob", subject: "for bob", body: "b")
        let synced = try await waitFor(fleet) { events in
            names.allSatisfy { name in
                events.contains {
                    Self.synced($0, messages: 1) && $0["device"] as? String == name
                        && $0["trigger"] as? String == "change"
                }
            }
        }
        #expect(synced, "not every device synced from its stream: \(fleet.output)")
        #expect(
            !Self.events(fleet.output).contains {
                $0["event"] as? String == "signal" && $0["payload"] != nil
                    && (($0["payload"] as? [String: Any])?["aps"] as? [String: Any])?["badge"] as? Int == 1
            })
    }
}
