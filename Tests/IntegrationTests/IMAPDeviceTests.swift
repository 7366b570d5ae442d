import Foundation
import TestSupport
import Testing

/// Signal, then fetch over IMAP: `mail-client run --fetch imap` registers with apns-sim through the API like any
/// device, and on each content-free signal runs a QRESYNC select of each mailbox (pipelined with a fetch of what is
/// new) and applies what changed: new messages, flags set elsewhere, a move (one update of the same id) and a
/// destruction.
@Suite(.serialized) struct IMAPDeviceTests {
    static func events(_ output: String) -> [[String: Any]] {
        output.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// Waits (off the cooperative pool) for a completed sync event after the first `after` events that `matches`.
    func waitForSync(
        _ client: ChildProcess, after count: Int, _ matches: @escaping @Sendable ([String: Any]) -> Bool
    ) async throws -> [String: Any]? {
        try await offPool {
            var found: [String: Any]?
            _ = client.waitForOutput(timeout: 30) { output in
                let syncs = Self.events(output).filter {
                    $0["event"] as? String == "sync-done" && $0["outcome"] as? String == "completed"
                }
                guard syncs.count > count, let match = syncs.dropFirst(count).first(where: matches) else {
                    return false
                }
                found = match
                return true
            }
            return found.map { SendableEvent($0) }
        }?.event
    }

    /// An event across the pool boundary (JSON values only).
    struct SendableEvent: @unchecked Sendable {  // immutable JSON values
        let event: [String: Any]
        init(_ event: [String: Any]) { self.event = event }
    }

    static func syncs(_ client: ChildProcess) -> Int {
        events(client.output).filter { $0["event"] as? String == "sync-done" }.count
    }

    @Test func aDeviceFetchesOverIMAPAfterEachSignalAndConverges() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"], mailboxdArguments: ["--imap-listen", "127.0.0.1:0"])
        let imapPort = try #require(cluster.imapPort)
        // The account starts empty (at modseq 0): the first change must still be newer than what the first sync saw.
        let client = try ChildProcess(
            TestEnvironment.executable("mail-client").path,
            [
                "run", "--server", cluster.api, "--ca", cluster.ca, "--sim", cluster.sim, "--username", "alice",
                "--state-dir", cluster.directory.path("alice-imap-phone"), "--topic", Cluster.topic,
                "--fallback-interval", "0", "--fetch", "imap", "--imap", "localhost:\(imapPort)",
            ], stdin: "password-alice\n", logDirectory: cluster.directory.url.path)
        defer { client.stop() }
        let first = try await waitForSync(client, after: 0) { $0["messages"] as? Int == 0 }
        try #require(first != nil, "the first sync did not list the mailboxes: \(client.output) \(client.errorOutput)")
        #expect((first?["state"] as? String)?.hasPrefix("imap:") == true)

        // Deliveries: each signal, then a QRESYNC delta with the created message.
        var seen = Self.syncs(client)
        let firstDelivered = try await cluster.deliver(to: "alice", subject: "first", body: "one")
        let firstID = try #require(firstDelivered["id"] as? String)
        let one = try await waitForSync(client, after: seen) { $0["messages"] as? Int == 1 }
        #expect(one?["created"] as? Int == 1, "\(client.output)")
        #expect(one?["full"] as? Bool == false, "a delta, not a full listing")
        seen = Self.syncs(client)
        let delivered = try await cluster.deliver(to: "alice", subject: "after", body: "two")
        let id = try #require(delivered["id"] as? String)
        let created = try await waitForSync(client, after: seen) { $0["messages"] as? Int == 2 }
        #expect(created?["created"] as? Int == 1, "\(client.output)")

        // Read and moved to the archive through /v1: one update of the same id, no create or destroy.
        seen = Self.syncs(client)
        let session = try await cluster.login("alice")
        let patched = try await cluster.call(
            .patch, cluster.api + "/v1/messages/\(id)", token: session, json: ["seen": true, "mailbox": "archive"])
        #expect(patched.status == 200)
        let moved = try await waitForSync(client, after: seen) { ($0["updated"] as? Int ?? 0) >= 1 }
        #expect(moved?["created"] as? Int == 0 && moved?["destroyed"] as? Int == 0, "\(client.output)")
        #expect(moved?["messages"] as? Int == 2)

        // Destroyed through /v1: VANISHED, and the cache lets it go.
        seen = Self.syncs(client)
        let deleted = try await cluster.call(.delete, cluster.api + "/v1/messages/\(id)", token: session)
        #expect(deleted.status == 204)
        let gone = try await waitForSync(client, after: seen) { $0["messages"] as? Int == 1 }
        #expect(gone?["destroyed"] as? Int == 1, "\(client.output)")

        // Flagged through /v1, nothing else: the known message fetched again (the second round trip), one update.
        seen = Self.syncs(client)
        let flagged = try await cluster.call(
            .patch, cluster.api + "/v1/messages/\(firstID)", token: session, json: ["flagged": true])
        #expect(flagged.status == 200)
        let updated = try await waitForSync(client, after: seen) { ($0["updated"] as? Int ?? 0) >= 1 }
        #expect(updated?["created"] as? Int == 0 && updated?["destroyed"] as? Int == 0, "\(client.output)")
        #expect(updated?["messages"] as? Int == 1)
    }
}
