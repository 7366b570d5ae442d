import Foundation
import HTTPClient
import Locking
import TestSupport
import Testing

/// The messages webpush-sim delivers to one subscription, in order: each event's fields, with the decrypted
/// plaintext parsed.
final class WebPushMessages: Sendable {
    private let response: HTTPClient.StreamingResponse
    private let received = LockedValue<[[String: any Sendable]]>([])
    private let reader: Task<Void, Never>

    init(response: HTTPClient.StreamingResponse) {
        self.response = response
        let received = self.received
        reader = Task { [response] in
            do {
                for try await event in response.body.serverSentEvents {
                    guard let object = try? JSONSerialization.jsonObject(with: Data(event.data.utf8)) as? [String: Any]
                    else { continue }
                    var fields: [String: any Sendable] = [:]
                    for (key, value) in object {
                        if let text = value as? String { fields[key] = text }
                        if let number = value as? NSNumber { fields[key] = number.intValue }
                    }
                    received.withLock { $0.append(fields) }
                }
            } catch {}
        }
    }

    var events: [[String: any Sendable]] { received.withLock { $0 } }

    /// The signals so far, decrypted (each the plaintext's JSON object).
    var signals: [[String: Any]] {
        events.compactMap { event in
            (event["plaintext"] as? String).flatMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
        }
    }

    /// Waits until a signal carries `tag`; returns it.
    func waitFor(tag: String) async -> [String: Any]? {
        _ = await eventually { signals.contains { $0["st"] as? String == tag } }
        return signals.last { $0["st"] as? String == tag }
    }

    deinit {
        reader.cancel()
        response.cancel()
    }
}

/// The loop for browsers, with the real binaries: mailboxd encrypts each signal to the subscription (RFC 8291),
/// signs it with its VAPID key (RFC 8292) and POSTs it to webpush-sim over TLS; webpush-sim validates and decrypts
/// it as the browser would; the browser fetches what changed over its own TLS connection.
@Suite(.serialized) struct WebPushSignalThenFetchTests {
    static func metric(_ text: String, _ prefix: String) -> Double {
        text.split(separator: "\n").filter { $0.hasPrefix(prefix) }
            .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0, +)
    }

    func messages(_ cluster: Cluster, _ id: String) async throws -> WebPushMessages {
        let response = try await cluster.client.stream(
            HTTPClient.Request(url: cluster.webPush + "/sim/subscriptions/\(id)/messages"))
        try #require(response.status == 200)
        return WebPushMessages(response: response)
    }

    @Test func aDeliveryReachesABrowserAsAnEncryptedContentFreeSignal() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"], webpush: true)
        let session = try await cluster.login("alice")
        let browser = try await cluster.registerBrowser(session: session)
        let stream = try await messages(cluster, browser.id)

        let subject = "Board minutes \(UUID().uuidString)"
        let sender = "chair-\(UUID().uuidString.prefix(8))@example.com"
        let body = "Confidential body \(UUID().uuidString)"
        let receipt = try await cluster.deliver(to: "alice", from: sender, subject: subject, body: body)
        let state = try #require(receipt["state"] as? String)
        let tag = try #require(cluster.tag(of: state, device: browser.id))
        let signal = try #require(await stream.waitFor(tag: tag), "no signal: \(cluster.mailboxd.errorOutput)")
        #expect(Set(signal.keys).isSubset(of: ["acct", "st", "badge"]))
        #expect(signal["badge"] as? Int == 1)
        // Every body the same length, with the headers of a signal.
        let events = stream.events
        #expect(events.count >= 2)
        #expect(Set(events.compactMap { $0["bodyBytes"] as? Int }).count == 1, "\(events)")
        #expect(events.allSatisfy { ($0["urgency"] as? String) == "normal" && ($0["ttl"] as? Int) == 3600 })
        #expect(Set(events.compactMap { $0["topic"] as? String }).count == 1, "one Topic per device")

        // webpush-sim saw ciphertext only: not the subject, sender, body, username, state or tag.
        let log = try await cluster.call(.get, cluster.webPush + "/sim/log")
        let text = String(decoding: log.data, as: UTF8.self)
        #expect(log.status == 200 && !text.isEmpty)
        for secret in [subject, sender, body, "alice", state, tag] { #expect(!text.contains(secret), "\(secret)") }

        // And the browser fetches what changed over its own TLS connection.
        let changes = try await cluster.call(
            .get, cluster.api + "/v1/changes?since=\(state.split(separator: "-")[0])-0", token: session)
        #expect((changes.body["created"] as? [[String: Any]])?.first?["subject"] as? String == subject)
        let metrics = String(decoding: try await cluster.call(.get, cluster.metrics).data, as: UTF8.self)
        #expect(Self.metric(metrics, #"mailboxd_signals_sent_total{service="webpush""#) >= 2)
    }

    @Test(arguments: [404, 410])
    func aGoneSubscriptionIsRemoved(status: Int) async throws {
        let cluster = try await Cluster.start(accounts: ["alice"], webpush: true)
        let session = try await cluster.login("alice")
        let browser = try await cluster.registerBrowser(session: session)
        let stream = try await messages(cluster, browser.id)
        #expect(await eventually { !stream.events.isEmpty }, "no signal for the registration")
        if status == 410 {
            #expect(try await cluster.call(.delete, cluster.webPush + "/sim/subscriptions/\(browser.id)").status == 204)
        } else {
            let scripted = try await cluster.call(
                .put, cluster.webPush + "/sim/subscriptions/\(browser.id)/error", json: ["status": 404])
            #expect([200, 204].contains(scripted.status), "\(scripted.body)")
        }
        _ = try await cluster.deliver(to: "alice", subject: "after unsubscribe", body: "x")
        // Once the subscription is dropped, deleting it finds nothing.
        let gone = try await eventually {
            try await cluster.call(.delete, cluster.api + "/v1/devices/\(browser.deviceID)", token: session)
                .status == 404
        }
        #expect(gone, "the subscription is still registered: \(cluster.mailboxd.errorOutput)")
    }

    @Test func tooManyRequestsIsRetriedAfterRetryAfterAndNotLost() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"], webpush: true)
        let session = try await cluster.login("alice")
        let browser = try await cluster.registerBrowser(session: session)
        let stream = try await messages(cluster, browser.id)
        let scripted = try await cluster.call(
            .put, cluster.webPush + "/sim/subscriptions/\(browser.id)/error",
            json: ["status": 429, "count": 1, "retryAfter": 1])
        #expect([200, 204].contains(scripted.status), "\(scripted.body)")
        let receipt = try await cluster.deliver(to: "alice", subject: "during a 429", body: "x")
        let state = try #require(receipt["state"] as? String)
        let tag = try #require(cluster.tag(of: state, device: browser.id))
        #expect(
            await stream.waitFor(tag: tag) != nil, "the refused signal never arrived: \(cluster.mailboxd.errorOutput)")
        let metrics = String(decoding: try await cluster.call(.get, cluster.metrics).data, as: UTF8.self)
        #expect(Self.metric(metrics, #"mailboxd_signal_retries_total{service="webpush""#) >= 1)
    }

    @Test func aTopicCollapsesTheSignalsQueuedForAnOfflineBrowser() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"], webpush: true)
        let session = try await cluster.login("alice")
        let browser = try await cluster.registerBrowser(session: session)
        // The registration's own signal is accepted first: otherwise it could count as a delivery's push below,
        // letting the next delivery start before that push was sent, and the queue receive them out of order.
        #expect(try await eventually { try await pushesAccepted(cluster) >= 1 }, "the registration's signal")
        let offline = try await cluster.call(
            .put, cluster.webPush + "/sim/subscriptions/\(browser.id)/online", json: ["online": false])
        #expect([200, 204].contains(offline.status))
        // Three deliveries, each sent (and queued at the push service) before the next.
        var queuedTags: [String] = []
        for index in 0..<3 {
            let accepted = try await pushesAccepted(cluster)
            let receipt = try await cluster.deliver(to: "alice", subject: "queued \(index)", body: "x")
            let state = try #require(receipt["state"] as? String)
            queuedTags.append(try #require(cluster.tag(of: state, device: browser.id)))
            #expect(try await eventually { try await pushesAccepted(cluster) > accepted }, "delivery \(index)")
        }
        let lastTag = try #require(queuedTags.last)
        let stream = try await messages(cluster, browser.id)
        let online = try await cluster.call(
            .put, cluster.webPush + "/sim/subscriptions/\(browser.id)/online", json: ["online": true])
        #expect([200, 204].contains(online.status))
        #expect(await stream.waitFor(tag: lastTag) != nil)
        // A change made now, online, arrives after whatever was queued: the queue held the newest signal only.
        let receipt = try await cluster.deliver(to: "alice", subject: "online", body: "x")
        let onlineState = try #require(receipt["state"] as? String)
        let onlineTag = try #require(cluster.tag(of: onlineState, device: browser.id))
        #expect(await stream.waitFor(tag: onlineTag) != nil)
        // The registration's own signal (a new device syncs to the account's state) may have reached the browser
        // before it went offline, or been queued and replaced like the others: it is not what this test counts.
        let tags = stream.signals.compactMap { $0["st"] as? String }
        #expect(
            tags.filter { queuedTags.contains($0) } == [lastTag] && tags.last == onlineTag,
            "the queued signals collapsed into the newest: \(stream.events)")
    }

    /// How many pushes webpush-sim accepted so far (its capture log's 201s).
    func pushesAccepted(_ cluster: Cluster) async throws -> Int {
        let log = try await cluster.call(.get, cluster.webPush + "/sim/log")
        let entries = (try? JSONSerialization.jsonObject(with: log.data)) as? [[String: Any]] ?? []
        return entries.filter { ($0["status"] as? Int) == 201 }.count
    }

    @Test func subscriptionsMailboxdMustNotSendToAreRefusedAndNeverRequested() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"], webpush: true)
        let session = try await cluster.login("alice")
        let vapid = try await cluster.call(.get, cluster.api + "/v1/webpush/vapid-public-key")
        let created = try await cluster.call(
            .post, cluster.webPush + "/sim/subscriptions", json: ["applicationServerKey": vapid.body["publicKey"]!])
        let subscription = try #require(created.body["subscription"] as? [String: Any])
        let endpoint = try #require(subscription["endpoint"] as? String)
        let keys = try #require(subscription["keys"] as? [String: Any])
        let path = String(endpoint.drop { $0 != "/" }.dropFirst(2).drop { $0 != "/" })
        let port = try #require(cluster.webPushPorts?.provider)
        func register(_ subscription: [String: Any]) async throws -> (Int, String?, String) {
            let result = try await cluster.call(
                .post, cluster.api + "/v1/devices", token: session,
                json: ["service": "webpush", "subscription": subscription])
            return (result.status, result.body["error"] as? String, String(decoding: result.data, as: UTF8.self))
        }
        func with(_ change: (inout [String: Any]) -> Void) -> [String: Any] {
            var copy = subscription
            change(&copy)
            return copy
        }
        var offCurve = keys
        offCurve["p256dh"] = "BAAA" + String((keys["p256dh"] as? String ?? "").dropFirst(4))
        let cases: [([String: Any], String)] = [
            (with { $0["endpoint"] = "https://127.0.0.2:\(port)\(path)" }, "invalidEndpoint"),
            (with { $0["endpoint"] = "https://[::1]:\(port)\(path)" }, "invalidEndpoint"),
            (with { $0["endpoint"] = "https://localhost:\(port)\(path)" }, "invalidEndpoint"),
            (with { $0["endpoint"] = "http://127.0.0.1:\(port)\(path)" }, "invalidEndpoint"),
            (with { $0["endpoint"] = endpoint + "/" + String(repeating: "a", count: 1100) }, "invalidEndpoint"),
            (with { $0["keys"] = offCurve }, "invalidKeys"),
            (with { $0["keys"] = ["p256dh": keys["p256dh"]!, "auth": "AAAAAAAAAAAAAAAAAAAA"] }, "invalidKeys"),
            (with { $0["keys"] = ["p256dh": keys["p256dh"]!] }, "invalidRequest"),
            (with { $0["extra"] = "x" }, "unknownField"),
            (with { $0["expirationTime"] = false }, "invalidRequest"),
            (with { $0["expirationTime"] = "soon" }, "invalidArgument"),
        ]
        for (body, code) in cases {
            let result = try await register(body)
            #expect(result.0 == 400 && result.1 == code, "\(code): \(result.2)")
            if let bad = body["endpoint"] as? String { #expect(!result.2.contains(bad)) }
        }
        let huge = try await cluster.call(
            .post, cluster.api + "/v1/devices", token: session,
            raw: Data(
                #"{"service":"webpush","subscription":{"endpoint":"\#(String(repeating: "x", count: 2 << 20))"}}"#.utf8),
            // A well-behaved client announces the body and waits: the server refuses it before it is sent.
            extraHeaders: [("Expect", "100-continue")])
        #expect(huge.status == 413)
        // Nothing reached the push service: its log holds no request.
        let log = try await cluster.call(.get, cluster.webPush + "/sim/log")
        let entries = (try? JSONSerialization.jsonObject(with: log.data)) as? [Any] ?? []
        #expect(entries.isEmpty, "\(String(decoding: log.data, as: UTF8.self))")
        #expect(!cluster.mailboxd.errorOutput.contains(path))
    }
}
