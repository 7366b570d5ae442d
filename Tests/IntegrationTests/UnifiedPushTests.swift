import Foundation
import TestSupport
import Testing

/// An Android app on a UnifiedPush distributor: `mail-client run --service unifiedpush` with webpush-sim as ntfy
/// (`--distributor ntfy`, HTTP/1.1 only). mailboxd finds that the distributor speaks no HTTP/2, sends its signals
/// over HTTP/1.1, and the app decrypts them with its own keys and converges.
@Suite("UnifiedPush")
struct UnifiedPushTests {
    @Test func anAndroidAppOnADistributorConvergesThroughSignalsOverHTTP1() async throws {
        let cluster = try await Cluster.start(
            accounts: ["alice"], webpush: true, webPushSimArguments: ["--distributor", "ntfy"])
        let client = try ChildProcess(
            TestEnvironment.executable("mail-client").path,
            [
                "run", "--server", cluster.api, "--ca", cluster.ca, "--sim", cluster.webPush, "--service",
                "unifiedpush", "--username", "alice", "--state-dir", cluster.directory.path("alice-android"),
                "--fallback-interval", "0",
            ], stdin: "password-alice\n", logDirectory: cluster.directory.url.path)
        defer { client.stop() }
        let ready = try await offPool {
            client.waitForOutput(timeout: 60) { output in
                output.contains(#""event":"stream""#) && output.contains(#""event":"registered""#)
            }
        }
        try #require(ready, "the app did not start: \(client.output) \(client.errorOutput)")
        #expect(client.output.contains(#""service":"unifiedpush""#))

        _ = try await cluster.deliver(to: "alice", subject: "canary-unifiedpush-4471", body: "b")
        let synced = try await offPool {
            client.waitForOutput(timeout: 30) { output in
                output.split(separator: "\n").contains {
                    $0.contains(#""event":"sync-done""#) && $0.contains(#""messages":1"#)
                        && $0.contains(#""trigger":"signal""#)
                }
            }
        }
        #expect(synced, "the app did not sync on its signal: \(client.output)")

        // The distributor saw HTTP/1.1 pushes it answered as ntfy does, and no content.
        let log = try await cluster.call(.get, cluster.webPush + "/sim/log")
        let entries = try #require(try JSONSerialization.jsonObject(with: log.data) as? [[String: Any]])
        #expect(!entries.isEmpty)
        #expect(entries.allSatisfy { $0["httpVersion"] as? String == "HTTP/1.1" && $0["status"] as? Int == 200 })
        #expect(!String(decoding: log.data, as: UTF8.self).contains("canary-unifiedpush"))
    }
}
