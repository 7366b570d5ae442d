import Foundation
import TestSupport
import Testing

/// A real browser as the device: headless Firefox ESR opens mailboxd's web client over TLS, its service worker
/// subscribes through webpush-sim's Mozilla push protocol listener (Firefox's own push client, pointed at it by
/// `dom.push.serverURL`), and a delivery shows up in the open page only by the push and the worker's fetch.
@Suite(.serialized) struct WebPushBrowserTests {
    @Test func firefoxSubscribesReceivesASignalAndFetchesTheMessage() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"], webpush: true)
        let subject = "Seen in Firefox \(UUID().uuidString.prefix(8))"
        let profile = cluster.directory.path("firefox-profile")
        let browser = try await offPool {
            try ChildProcess(
                TestEnvironment.python,
                [
                    TestEnvironment.peer("webpush_firefox.py"), "--page", cluster.api + "/web/", "--ca", cluster.ca,
                    "--push-server", cluster.mozillaPush, "--username", "alice", "--profile-dir", profile,
                    "--timeout", "90",
                ], stdin: "password-alice\n{\"expect\":\"\(subject)\"}\n", logDirectory: cluster.directory.url.path)
        }
        defer { _ = browser.stop() }
        let subscribed = try await offPool {
            browser.waitForOutput(timeout: 120) { $0.contains(#""subscribed""#) || $0.contains(#""error""#) }
        }
        try #require(
            subscribed && browser.output.contains(#""subscribed""#),
            "Firefox did not subscribe: \(browser.output) \(browser.errorOutput)")

        // The page registered one Web Push device, made for mailboxd's VAPID key.
        let sims = try await cluster.call(.get, cluster.webPush + "/sim/subscriptions")
        #expect(sims.status == 200)
        let delivery = try await cluster.deliver(
            to: "alice", subject: subject, body: "Only the browser's fetch shows this")
        #expect(delivery["state"] is String)
        let seen = try await offPool {
            browser.waitForOutput(timeout: 60) { $0.contains(#""seen""#) || $0.contains(#""error""#) }
        }
        #expect(
            seen && browser.output.contains(#""seen""#),
            "the message never appeared in the page: \(browser.output) \(browser.errorOutput)")

        // The signal went through the push service as ciphertext only.
        let log = String(decoding: try await cluster.call(.get, cluster.webPush + "/sim/log").data, as: UTF8.self)
        #expect(!log.contains(subject) && !log.contains("alice"))
        let metrics = String(decoding: try await cluster.call(.get, cluster.metrics).data, as: UTF8.self)
        #expect(WebPushSignalThenFetchTests.metric(metrics, #"mailboxd_signals_sent_total{service="webpush""#) >= 2)
        #expect(
            WebPushSignalThenFetchTests.metric(metrics, #"mailboxd_sync_requests_total{kind="delta""#) >= 1,
            "the service worker fetched over /v1/changes")
    }
}
