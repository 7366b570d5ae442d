import Foundation
import OpenSSLCrypto
import TestSupport
import Testing

/// Real mailboxd, apns-sim and mail-client processes.
@Suite(.serialized) struct ConvergenceDrillTests: Sendable {
    /// Starts `mail-client run` for `user`, with a short fallback timer so lost signals are made up for.
    func startClient(_ cluster: Cluster, user: String, name: String) throws -> (ChildProcess, String) {
        let stateDir = cluster.directory.path("client-\(name)")
        let client = try ChildProcess(
            TestEnvironment.executable("mail-client").path,
            [
                "run", "--server", cluster.api, "--ca", cluster.ca, "--sim", cluster.sim, "--username", user,
                "--state-dir", stateDir, "--device-name", name, "--topic", Cluster.topic, "--fallback-interval", "2",
            ], stdin: "password-\(user)\n", logDirectory: cluster.directory.url.path)
        return (client, stateDir)
    }

    /// The server's mailbox for `session`, by id: (mailbox, seen, flagged).
    func serverMailbox(_ cluster: Cluster, session: String) async throws -> [String: String] {
        var result: [String: String] = [:]
        var cursor: String?
        repeat {
            let page = try await cluster.call(
                .get, cluster.api + "/v1/messages?limit=1000" + (cursor.map { "&cursor=\($0)" } ?? ""), token: session)
            for m in page.body["messages"] as? [[String: Any]] ?? [] {
                result[m["id"] as! String] = "\(m["mailbox"]!)|\(m["seen"]!)|\(m["flagged"]!)"
            }
            cursor = page.body["nextCursor"] as? String
        } while cursor != nil
        return result
    }

    func cachedMailbox(_ stateDir: String) throws -> [String: String] {
        let dump = try Subprocess.run(
            TestEnvironment.executable("mail-client").path, ["dump", "--state-dir", stateDir])
        guard dump.status == 0,
            let object = try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any]
        else { return [:] }
        var result: [String: String] = [:]
        for m in object["messages"] as? [[String: Any]] ?? [] {
            result[m["id"] as! String] = "\(m["mailbox"]!)|\(m["seen"]!)|\(m["flagged"]!)"
        }
        return result
    }

    /// 3 clients across 2 accounts; 200 deliveries plus flag changes and deletes; the gateway drops 30% of
    /// notifications. At the end every client's cache equals its account's server mailbox.
    @Test func everyClientConvergesDespiteDroppedSignals() async throws {
        let cluster = try await Cluster.start(simArguments: ["--fault-drop", "0.3", "--fault-seed", "7"])
        let clients = [
            try await offPool { try startClient(cluster, user: "alice", name: "alice-phone") },
            try await offPool { try startClient(cluster, user: "alice", name: "alice-tablet") },
            try await offPool { try startClient(cluster, user: "bob", name: "bob-phone") },
        ]
        let users = ["alice", "alice", "bob"]
        let sessions = ["alice": try await cluster.login("alice"), "bob": try await cluster.login("bob")]
        var ids: [String: [String]] = ["alice": [], "bob": []]
        for i in 0..<200 {
            let to = i % 3 == 2 ? "bob" : "alice"
            let receipt = try await cluster.deliver(to: to, subject: "message \(i)", body: "body \(i)")
            ids[to]!.append(receipt["id"] as! String)
            if i % 10 == 9, let id = ids[to]!.randomElement() {
                _ = try await cluster.call(
                    .patch, cluster.api + "/v1/messages/\(id)", token: sessions[to],
                    json: ["seen": true, "flagged": true])
            }
            if i % 25 == 24, let id = ids[to]!.popLast() {
                _ = try await cluster.call(.delete, cluster.api + "/v1/messages/\(id)", token: sessions[to])
            }
        }
        var last: [String] = []
        let converged = try await eventually(timeout: .seconds(60)) {
            last = []
            for (index, (_, stateDir)) in clients.enumerated() {
                let server = try await serverMailbox(cluster, session: sessions[users[index]]!)
                let cache = try await offPool { try cachedMailbox(stateDir) }
                if server != cache {
                    last.append("\(users[index]) #\(index): server \(server.count), cache \(cache.count)")
                }
            }
            return last.isEmpty
        }
        #expect(converged, "not converged: \(last)")
        let log = String(decoding: try await cluster.call(.get, cluster.sim + "/sim/log").data, as: UTF8.self)
        #expect(log.contains("dropped"), "the gateway dropped nothing: the drill did not test lost signals")
        for (client, _) in clients { client.stop() }
    }

    /// Subjects, senders and bodies are random canary strings: none of them, nor the username, appears in any
    /// payload the gateway received.
    @Test func noContentReachesTheGateway() async throws {
        let user = "canary-\(SecureRandom.hex(6))"
        let cluster = try await Cluster.start(accounts: [user])
        let (client, _) = try await offPool { try startClient(cluster, user: user, name: "phone") }
        defer { client.stop() }
        // Deliver only once the device is registered, so every delivery is signalled.
        let synced = try await offPool { client.waitForOutput(timeout: 60) { $0.contains("\"sync-done\"") } }
        try #require(
            synced,
            "the client never synced: \(client.output) \(client.errorOutput)")
        var canaries: [String] = [user]
        for _ in 0..<20 {
            let subject = "subj-\(SecureRandom.hex(10))"
            let sender = "from-\(SecureRandom.hex(10))@example.com"
            let body = "body-\(SecureRandom.hex(10)) {\"aps\":{\"alert\":\"leak\"}}"
            canaries += [subject, sender, body]
            _ = try await cluster.deliver(to: user, from: sender, subject: subject, body: body)
        }
        var text = ""
        _ = try await eventually {
            let log = try await cluster.call(.get, cluster.sim + "/sim/log")
            text = String(decoding: log.data, as: UTF8.self)
            return text.contains("delivered") && client.output.components(separatedBy: "\"signal\"").count > 2
        }
        #expect(text.count > 100, "the gateway log is empty")
        for canary in canaries { #expect(!text.contains(canary), "a canary reached the gateway") }
        #expect(!text.contains("subj-") && !text.contains("from-") && !text.contains("body-"))
        #expect(!text.contains("leak"))
    }
}
