import Foundation
import HTTPClient
import Locking
import ServerSentEvents
import TestSupport
import Testing

/// The console on the real binaries: headless Chromium watches a device's change, signal and fetch, with the lag
/// and the server's own freshness figures, across a cut stream; the raw stream's events, replay and content-free
/// values; and who may open it.
@Suite(.serialized) struct ConsoleTests {
    /// An account whose name is markup: the console must show it as text.
    static let hostile = "<img/src=x/onerror=window.__pwned=1><script>window.__pwned=2</script>"

    /// Signs in to the console with `token` (a form post, from this origin); returns the status, the cookie and the
    /// JSON body.
    static func signIn(
        _ cluster: Cluster, token: String, headers extra: HTTPHeaders = [:]
    ) async throws -> (status: Int, cookie: String?, body: [String: Any]) {
        var headers: HTTPHeaders = ["Content-Type": "application/x-www-form-urlencoded"]
        for field in extra { headers.add(name: field.name, value: field.value) }
        let form = "token=" + (token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
        let response = try await cluster.client.execute(
            HTTPClient.Request(
                method: .post, url: cluster.api + "/console/session", headers: headers, body: Data(form.utf8)))
        let cookie = response.headers["Set-Cookie"].flatMap { header -> String? in
            guard let pair = header.split(separator: ";").first, pair.hasPrefix("signalfetch_console=") else {
                return nil
            }
            return String(pair)
        }
        let body = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any] ?? [:]
        return (response.status, cookie, body)
    }

    static func consoleToken(_ cluster: Cluster) throws -> String {
        try String(contentsOfFile: cluster.dataDir + "/console-token", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A simulated iPhone for `user` (`mail-client run`), once it registered and made its launch sync.
    static func startDevice(_ cluster: Cluster, user: String) async throws -> ChildProcess {
        let device = try ChildProcess(
            TestEnvironment.executable("mail-client").path,
            [
                "run", "--server", cluster.api, "--ca", cluster.ca, "--sim", cluster.sim, "--username", user,
                "--state-dir", cluster.directory.path("device-\(user)"), "--device-name", "\(user)-phone", "--topic",
                Cluster.topic, "--fallback-interval", "0",
            ], stdin: "password-\(user)\n", logDirectory: cluster.directory.url.path)
        let ready = try await offPool {
            device.waitForOutput(timeout: 30) { $0.contains(#""event":"stream""#) }
        }
        try #require(ready, "the device did not start: \(device.output) \(device.errorOutput)")
        return device
    }

    @Test func chromiumWatchesAChangeItsSignalAndItsFetchAcrossACutStream() async throws {
        let cluster = try await Cluster.start(accounts: ["alice", Self.hostile])
        let device = try await Self.startDevice(cluster, user: "alice")
        defer { _ = device.stop() }
        let home = cluster.directory.path("chromium-home")
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        let browser = try await offPool {
            try ChildProcess(
                TestEnvironment.python,
                [
                    TestEnvironment.peer("console_chromium.py"), "--api", cluster.api, "--ca", cluster.ca,
                    "--console-token-file", cluster.dataDir + "/console-token", "--delivery-token-file",
                    cluster.dataDir + "/delivery-token", "--metrics", cluster.metrics, "--account", "alice",
                    "--hostile-account", Self.hostile, "--home", home, "--timeout", "45",
                ], logDirectory: cluster.directory.url.path)
        }
        defer { _ = browser.stop() }
        let finished = try await offPool {
            browser.waitForOutput(timeout: 240) {
                $0.contains(#""event": "done""#) || $0.contains(#""event": "error""#)
            }
        }
        #expect(
            finished && browser.output.contains(#""event": "done""#),
            "Chromium: \(browser.output) \(browser.errorOutput.suffix(4000))")
        for step in ["wrong token refused", "signed in", "row", "freshness", "reconnected", "markup shown as text"] {
            #expect(browser.output.contains(#""step": "\#(step)""#), "step \(step) missing: \(browser.output)")
        }
    }

    @Test func theStreamHasEveryEventTypeReplaysFromLastEventIDAndCarriesNoContent() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"])
        let signedIn = try await Self.signIn(cluster, token: try Self.consoleToken(cluster))
        #expect(signedIn.status == 303)
        let cookie = try #require(signedIn.cookie)
        let stream = try await cluster.client.stream(
            HTTPClient.Request(url: cluster.api + "/console/events?after=0", headers: ["Cookie": cookie]))
        try #require(stream.status == 200)
        let events = LockedEvents()
        let reader = Task {
            do {
                for try await event in stream.body.serverSentEvents { events.append(event) }
            } catch {}
        }
        defer {
            reader.cancel()
            stream.cancel()
        }
        // A device, a delivery with canaries in every field, and the device's fetch.
        let session = try await cluster.login("alice")
        let token = try await cluster.registerDevice(session: session)
        let canary = "canary-\(UUID().uuidString.prefix(8))"
        let delivered = try await cluster.deliver(
            to: "alice", from: "\(canary)-from@example.com", subject: "\(canary) subject", body: "\(canary) body")
        let state = try #require(delivered["state"] as? String)
        let listing = try await cluster.call(.get, cluster.api + "/v1/messages", token: session)
        let launched = try #require(listing.body["state"] as? String)
        _ = try await cluster.call(.get, cluster.api + "/v1/changes?since=\(launched)", token: session)
        _ = await eventually { Set(events.all.map(\.event)).isSuperset(of: ["change", "signal", "fetch"]) }
        let seen = events.all
        #expect(Set(seen.map(\.event)).isSuperset(of: ["change", "signal", "fetch"]), "\(seen.map(\.event))")
        let change = try #require(seen.first { $0.event == "change" })
        #expect(change.data.contains(#""account":"alice""#) && change.data.contains(state))
        let signal = try #require(seen.first { $0.event == "signal" && $0.data.contains(#""outcome":"sent""#) })
        #expect(signal.data.contains(#""service":"apns""#) && signal.data.contains(#""latencyMs":"#))
        // The change's trace id, as the OTLP exporter names it (32 hex digits an operator can paste).
        let trace = (try? JSONSerialization.jsonObject(with: Data(signal.data.utf8)) as? [String: Any])?["trace"]
        #expect((trace as? String)?.count == 32 && (trace as? String)?.allSatisfy(\.isHexDigit) == true)
        for event in seen {
            #expect(event.id.flatMap { Int($0) } != nil, "every event has an id")
            for secret in [canary, token, session, "example.com"] {
                #expect(!event.data.contains(secret), "the console stream carried \(secret): \(event.data)")
            }
        }
        // A reconnect from an id is replayed exactly what came after it.
        let ids = seen.compactMap { $0.id.flatMap { Int($0) } }
        let middle = try #require(ids.dropFirst().first)
        let replay = try await cluster.client.stream(
            HTTPClient.Request(
                url: cluster.api + "/console/events", headers: ["Cookie": cookie, "Last-Event-ID": String(middle)]))
        var replayed: [Int] = []
        for try await event in replay.body.serverSentEvents {
            replayed.append(Int(event.id ?? "") ?? -1)
            if replayed.count == ids.count - ids.firstIndex(of: middle)! - 1 { break }
        }
        replay.cancel()
        #expect(replayed == Array(ids.drop(while: { $0 <= middle })), "replayed \(replayed) of \(ids)")
        // The snapshot holds the same events and the device, with no token or address.
        let snapshot = try await cluster.client.execute(
            HTTPClient.Request(url: cluster.api + "/console/snapshot", headers: ["Cookie": cookie]))
        let text = String(decoding: snapshot.body, as: UTF8.self)
        #expect(snapshot.status == 200 && text.contains(#""lastEventId":"#) && text.contains(#""devices":[{"#))
        #expect(!text.contains(token) && !text.contains(canary))
        // The cluster view is the store's: this instance has reported itself there.
        #expect(text.contains(#""instances":[{"changes":"#) && text.contains(#""id":"cluster-mailboxd""#), "\(text)")
    }

    @Test func onlyAnOperatorWithTheTokenFromThisSiteGetsIn() async throws {
        let cluster = try await Cluster.start(accounts: [])
        let token = try Self.consoleToken(cluster)
        for path in ["/console/snapshot", "/console/events"] {
            let anonymous = try await cluster.call(.get, cluster.api + path)
            #expect(anonymous.status == 401 && anonymous.body["error"] as? String == "unauthorized", "\(path)")
            let forged = try await cluster.client.execute(
                HTTPClient.Request(
                    url: cluster.api + path, headers: ["Cookie": "signalfetch_console=9999999999.AAAAAAAAAAAAAAAAAAAA"])
            )
            #expect(forged.status == 401, "a forged cookie on \(path)")
        }
        // The page without a cookie is the sign-in form; it and every console answer forbid inline script.
        let page = try await cluster.call(.get, cluster.api + "/console")
        #expect(page.status == 200 && String(decoding: page.data, as: UTF8.self).contains(#"name="token""#))
        let policy = try #require(page.headers["Content-Security-Policy"])
        #expect(policy.contains("script-src 'self'") && !policy.contains("unsafe-inline"))
        let wrong = try await Self.signIn(cluster, token: "not-the-console-token")
        #expect(wrong.status == 401 && wrong.cookie == nil && wrong.body["error"] as? String == "invalidToken")
        let elsewhere = try await Self.signIn(cluster, token: token, headers: ["Origin": "https://evil.example"])
        #expect(
            elsewhere.status == 403 && elsewhere.cookie == nil && elsewhere.body["error"] as? String == "crossOrigin")
        let right = try await Self.signIn(cluster, token: token)
        let cookie = try #require(right.cookie)
        #expect(right.status == 303)
        let crossSite = try await cluster.client.execute(
            HTTPClient.Request(
                url: cluster.api + "/console/snapshot", headers: ["Cookie": cookie, "Sec-Fetch-Site": "cross-site"]))
        #expect(crossSite.status == 403, "a page on another site cannot read the console, cookie or not")
        let own = try await cluster.client.execute(
            HTTPClient.Request(url: cluster.api + "/console/snapshot", headers: ["Cookie": cookie]))
        #expect(own.status == 200)
        let badAfter = try await cluster.client.execute(
            HTTPClient.Request(url: cluster.api + "/console/events?after=soon", headers: ["Cookie": cookie]))
        let badAfterBody = (try? JSONSerialization.jsonObject(with: badAfter.body)) as? [String: Any] ?? [:]
        #expect(badAfter.status == 400 && badAfterBody["error"] as? String == "invalidArgument")
        let long = try await Self.signIn(cluster, token: String(repeating: "t", count: 300))
        #expect(long.status == 400 && long.cookie == nil && long.body["error"] as? String == "invalidRequest")
        // Wrong tokens are throttled like sign-ins.
        var statuses: [Int] = []
        for _ in 0..<6 { statuses.append(try await Self.signIn(cluster, token: "wrong").status) }
        #expect(statuses.suffix(2) == [401, 429], "\(statuses)")
    }

    @Test func withoutATokenThereIsNoConsole() async throws {
        let cluster = try await Cluster.start(accounts: [])
        try FileManager.default.removeItem(atPath: cluster.dataDir + "/console-token")
        try await offPool { try cluster.crashAndRestartMailboxd() }
        #expect(try await cluster.call(.get, cluster.api + "/console").status == 404)
        #expect(try await cluster.call(.get, cluster.api + "/console/snapshot").status == 404)
    }
}

/// Events read from a stream, guarded by a lock.
final class LockedEvents: Sendable {
    private let events = LockedValue<[ServerSentEvent]>([])
    func append(_ event: ServerSentEvent) { events.withLock { $0.append(event) } }
    var all: [ServerSentEvent] { events.withLock { $0 } }
}
