import Foundation
import TestSupport
import Testing

/// `mail-client fleet`: several simulated devices in one process, each its own engine, cache and stream, each
/// line tagged with its device; every device converges on its account through signals.
@Suite("mail-client fleet")
struct FleetTests {
    @Test func devicesInOneProcessEachConvergeThroughSignals() async throws {
        let cluster = try await Cluster.start()
        let fleet = try ChildProcess(
            TestEnvironment.executable("mail-client").path,
            [
                "fleet", "--server", cluster.api, "--ca", cluster.ca, "--sim", cluster.sim, "--state-dir",
                cluster.directory.path("fleet"), "--topic", Cluster.topic, "--fallback-interval", "0",
            ],
            stdin: "alice-phone alice password-alice\nalice-tablet alice password-alice\nbob-phone bob password-bob\n",
            logDirectory: cluster.directory.url.path)
        defer { fleet.stop() }
        let names = ["alice-phone", "alice-tablet", "bob-phone"]
        @Sendable func lines(_ event: String, _ device: String) -> Int {
            fleet.output.split(separator: "\n").filter {
                $0.contains("\"event\":\"\(event)\"") && $0.contains("\"device\":\"\(device)\"")
            }.count
        }
        let streaming = try await offPool {
            fleet.waitForOutput(timeout: 60) { _ in names.allSatisfy { lines("stream", $0) >= 1 } }
        }
        try #require(streaming, "not every device holds its stream: \(fleet.output) \(fleet.errorOutput)")
        _ = try await cluster.deliver(to: "alice", subject: "to both of alice's devices", body: "b")
        _ = try await cluster.deliver(to: "bob", subject: "to bob", body: "b")
        // Each device gets its own signal and syncs the one new message; no device's lines come without its tag.
        let synced = try await offPool {
            fleet.waitForOutput(timeout: 30) { output in
                names.allSatisfy { name in
                    output.split(separator: "\n").contains {
                        $0.contains("\"device\":\"\(name)\"") && $0.contains("\"event\":\"sync-done\"")
                            && $0.contains("\"messages\":1")
                    }
                }
            }
        }
        #expect(synced, "not every device synced its message: \(fleet.output)")
        for name in names { #expect(lines("signal", name) >= 1, "\(name) got no signal") }
        #expect(fleet.output.split(separator: "\n").allSatisfy { $0.contains("\"device\":\"") })
        #expect(fleet.isRunning)
    }

    @Test func aFleetMixesIOSAndroidAndBrowserDevices() async throws {
        let cluster = try await Cluster.start(fcm: true, webpush: true)
        let fleet = try ChildProcess(
            TestEnvironment.executable("mail-client").path,
            [
                "fleet", "--server", cluster.api, "--ca", cluster.ca, "--sim", cluster.sim, "--fcm-sim", cluster.fcm,
                "--app", Cluster.androidApp, "--webpush-sim", cluster.webPush, "--state-dir",
                cluster.directory.path("fleet"), "--topic", Cluster.topic, "--fallback-interval", "0",
            ],
            stdin: "alice-phone alice password-alice apns\nalice-android alice password-alice fcm\n"
                + "alice-browser alice password-alice webpush\n",
            logDirectory: cluster.directory.url.path)
        defer { fleet.stop() }
        let names = ["alice-phone", "alice-android", "alice-browser"]
        let streaming = try await offPool {
            fleet.waitForOutput(timeout: 60) { output in
                names.allSatisfy { name in
                    output.split(separator: "\n").contains {
                        $0.contains("\"event\":\"stream\"") && $0.contains("\"device\":\"\(name)\"")
                    }
                }
            }
        }
        try #require(streaming, "not every device holds its stream: \(fleet.output) \(fleet.errorOutput)")
        _ = try await cluster.deliver(to: "alice", subject: "to an iPhone, an Android phone and a browser", body: "b")
        let synced = try await offPool {
            fleet.waitForOutput(timeout: 30) { output in
                names.allSatisfy { name in
                    output.split(separator: "\n").contains {
                        $0.contains("\"device\":\"\(name)\"") && $0.contains("\"event\":\"sync-done\"")
                            && $0.contains("\"messages\":1") && $0.contains("\"trigger\":\"signal\"")
                    }
                }
            }
        }
        #expect(synced, "not every device synced on a signal: \(fleet.output)")
        let registered = fleet.output.split(separator: "\n").filter { $0.contains("\"event\":\"registered\"") }
        #expect(registered.contains { $0.contains("\"service\":\"fcm\"") && $0.contains("alice-android") })
        #expect(registered.contains { $0.contains("\"service\":\"apns\"") && $0.contains("alice-phone") })
        #expect(registered.contains { $0.contains("\"service\":\"webpush\"") && $0.contains("alice-browser") })
        // The browser-shaped device decrypted its signals with its own keys: webpush-sim only forwarded ciphertext.
        let browserSignals = fleet.output.split(separator: "\n").filter {
            $0.contains("\"event\":\"signal\"") && $0.contains("\"device\":\"alice-browser\"")
        }
        #expect(!browserSignals.isEmpty && browserSignals.allSatisfy { $0.contains("\"acct\":") })
        #expect(browserSignals.allSatisfy { $0.contains("\"bodyBytes\":256") })
        let subscriptions = try await cluster.call(.get, cluster.webPush + "/sim/subscriptions")
        let kinds = (subscriptions.body["subscriptions"] as? [[String: Any]])?.compactMap { $0["kind"] as? String }
        #expect(kinds == ["device"], "\(subscriptions.body)")
    }
}
