import Foundation
import HTTPClient
import TestSupport
import Testing

/// The loop for Android devices, with the real binaries: mailboxd signals through fcm-sim (FCM HTTP v1 over
/// TLS, OAuth through its token endpoint), the device gets a content-free data message and fetches over TLS.
@Suite(.serialized) struct FCMSignalThenFetchTests {
    static func metric(_ text: String, _ prefix: String) -> Double {
        text.split(separator: "\n").filter { $0.hasPrefix(prefix) }
            .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0, +)
    }

    @Test func aDeliveryReachesAnAndroidDeviceAsAContentFreeDataMessage() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"], fcm: true)
        let session = try await cluster.login("alice")
        let device = try await cluster.registerAndroidDevice(session: session)
        let stream = try await cluster.messages(device.token)
        _ = await stream.waitFor(count: 1)

        let subject = "Quarterly numbers \(UUID().uuidString)"
        let sender = "cfo-\(UUID().uuidString.prefix(8))@example.com"
        let body = "Confidential body \(UUID().uuidString)"
        let receipt = try await cluster.deliver(to: "alice", from: sender, subject: subject, body: body)
        let state = try #require(receipt["state"] as? String)
        let tag = try #require(cluster.tag(of: state, device: device.token))
        #expect(await stream.waitForLastTag(tag), "no signal for the new state: \(cluster.mailboxd.errorOutput)")
        let data = stream.parsed.last ?? [:]
        #expect(Set(data.keys).isSubset(of: ["acct", "st", "badge"]))
        #expect(data.values.allSatisfy { $0 is String }, "FCM data values are strings")

        // fcm-sim saw no content: not the subject, sender, body, username or state.
        let log = try await cluster.call(.get, cluster.fcm + "/sim/log")
        let text = String(decoding: log.data, as: UTF8.self)
        #expect(log.status == 200 && text.contains(tag))
        for secret in [subject, sender, body, "alice", state] { #expect(!text.contains(secret)) }
        let entries = (try? JSONSerialization.jsonObject(with: log.data)) as? [[String: Any]] ?? []
        let sends = entries.filter { $0["kind"] as? String != "token" }
        let request = try #require(sends.last?["body"] as? String)
        #expect(request.contains(#""priority":"normal""#), "background signals are normal priority")
        #expect(!request.contains("notification"), "data-only")

        // And the device fetches what changed over its own TLS connection.
        let changes = try await cluster.call(
            .get, cluster.api + "/v1/changes?since=\(state.split(separator: "-")[0])-0", token: session)
        #expect(changes.status == 200)
        #expect((changes.body["created"] as? [[String: Any]])?.first?["subject"] as? String == subject)
        let metrics = String(decoding: try await cluster.call(.get, cluster.metrics).data, as: UTF8.self)
        #expect(Self.metric(metrics, #"mailboxd_signals_sent_total{service="fcm""#) >= 2)
    }

    @Test func registrationsAreCheckedByTheirService() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"], fcm: true)
        let session = try await cluster.login("alice")
        let api = cluster.api + "/v1/devices"
        let token = "bk3RNwTe3H0:APA91b" + String(repeating: "Ab9_-", count: 28)
        func register(_ body: [String: Any]) async throws -> (Int, String?) {
            let result = try await cluster.call(.post, api, token: session, json: body)
            return (result.status, result.body["error"] as? String)
        }
        let unknownApp = try await register(["service": "fcm", "token": token, "app": "com.example.other"])
        #expect(unknownApp.0 == 400 && unknownApp.1 == "unknownApp")
        let malformed = try await register(["service": "fcm", "token": "not a token", "app": Cluster.androidApp])
        #expect(malformed.0 == 400 && malformed.1 == "invalidArgument")
        let apnsField = try await register(
            ["service": "fcm", "token": token, "app": Cluster.androidApp, "topic": Cluster.topic])
        #expect(apnsField.0 == 400 && apnsField.1 == "unknownField")
        let unknownService = try await register(["service": "webpush", "token": token])
        #expect(unknownService.0 == 400 && unknownService.1 == "unknownService")
        let noService = try await register(["service": "carrier-pigeon", "token": token])
        #expect(noService.0 == 400 && noService.1 == "invalidArgument")
        // Without `service`, a registration is APNs's, as before.
        let apns = try await cluster.call(
            .post, api, token: session,
            json: ["token": String(repeating: "AB", count: 32), "topic": Cluster.topic, "environment": "sandbox"])
        #expect(apns.status == 201 && apns.body["service"] as? String == "apns")
        #expect(apns.body["token"] as? String == String(repeating: "ab", count: 32), "APNs tokens are lower-cased")
        // A valid FCM registration keeps its token's case and gets an id and a signal key.
        let fcm = try await cluster.call(
            .post, api, token: session, json: ["service": "fcm", "token": token, "app": Cluster.androidApp])
        #expect(fcm.status == 201 && fcm.body["token"] as? String == token)
        #expect((fcm.body["signalKey"] as? String)?.count == 43)
        let id = try #require(fcm.body["id"] as? String)
        #expect(try await cluster.call(.delete, api + "/\(id)", token: session).status == 204)
        #expect(try await cluster.call(.delete, api + "/\(id)", token: session).status == 404)
        // The error never echoes the token.
        let log = cluster.mailboxd.errorOutput
        #expect(!log.contains(token))
    }

    @Test func anUninstalledAppsTokenIsRemovedFromMailboxd() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"], fcm: true)
        let session = try await cluster.login("alice")
        let device = try await cluster.registerAndroidDevice(session: session)
        let stream = try await cluster.messages(device.token)
        _ = await stream.waitFor(count: 1)
        let uninstall = try await cluster.call(.delete, cluster.fcm + "/sim/devices/\(Cluster.segment(device.token))")
        #expect(uninstall.status == 204)
        _ = try await cluster.deliver(to: "alice", subject: "after uninstall", body: "x")
        // Once the registration is dropped, deleting it finds nothing.
        let gone = try await eventually {
            try await cluster.call(.delete, cluster.api + "/v1/devices/\(device.id)", token: session).status == 404
        }
        #expect(gone, "the device is still registered: \(cluster.mailboxd.errorOutput)")
        let metrics = String(decoding: try await cluster.call(.get, cluster.metrics).data, as: UTF8.self)
        #expect(metrics.contains(#"reason="UNREGISTERED""#))
    }

    @Test func quotaExceededIsRetriedAfterRetryAfterAndNotLost() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"], fcm: true)
        let session = try await cluster.login("alice")
        let device = try await cluster.registerAndroidDevice(session: session)
        let stream = try await cluster.messages(device.token)
        _ = await stream.waitFor(count: 1)
        let scripted = try await cluster.call(
            .put, cluster.fcm + "/sim/devices/\(Cluster.segment(device.token))/error",
            json: ["status": 429, "errorCode": "QUOTA_EXCEEDED", "count": 1, "retryAfter": 1])
        #expect(scripted.status == 200 || scripted.status == 204, "\(scripted.body)")
        let receipt = try await cluster.deliver(to: "alice", subject: "during a quota", body: "x")
        let state = try #require(receipt["state"] as? String)
        let tag = try #require(cluster.tag(of: state, device: device.token))
        #expect(
            await stream.waitForLastTag(tag),
            "the signal refused for quota never arrived: \(cluster.mailboxd.errorOutput)")
        let metrics = String(decoding: try await cluster.call(.get, cluster.metrics).data, as: UTF8.self)
        #expect(Self.metric(metrics, #"mailboxd_signal_retries_total{service="fcm""#) >= 1)
        #expect(metrics.contains(#"reason="QUOTA_EXCEEDED""#))
    }

    @Test func instancesSharingAStoreAskTheTokenEndpointOncePerLifetime() async throws {
        let database = try PostgresServer.shared().makeDatabase()
        let cluster = try await Cluster.start(
            accounts: [], mailboxdArguments: ["--database", database], fcm: true)
        let (other, otherPort) = try await offPool { try cluster.startAnotherMailboxd(instanceID: "mbx-b") }
        defer { other.stop() }
        try await cluster.addAccount("alice", database: database)
        let session = try await cluster.login("alice")
        let device = try await cluster.registerAndroidDevice(session: session)
        let stream = try await cluster.messages(device.token)
        _ = await stream.waitFor(count: 1)
        // Each instance in turn is the only one left to send: both must have sent with the one stored token.
        var restarted: ChildProcess?
        for round in 0..<2 {
            if round == 0 { cluster.mailboxd.stop() } else { other.stop() }
            if round == 1 {
                restarted = try await offPool {
                    try cluster.startAnotherMailboxd(port: cluster.apiPort, instanceID: "mbx-a").process
                }
            }
            let api = round == 0 ? "https://127.0.0.1:\(otherPort)" : cluster.api
            let delivered = try await cluster.call(
                .post, api + "/v1/deliveries", token: cluster.deliveryToken,
                json: ["to": "alice", "from": "x@example.com", "subject": "round \(round)", "body": "x"])
            try #require(delivered.status == 201)
            let state = try #require(delivered.body["state"] as? String)
            let tag = try #require(cluster.tag(of: state, device: device.token))
            #expect(await stream.waitForLastTag(tag), "round \(round): no signal")
        }
        restarted?.stop()
        let simMetrics = String(
            decoding: try await cluster.call(.get, cluster.fcm + "/metrics").data, as: UTF8.self)
        #expect(Self.metric(simMetrics, "fcm_sim_token_requests_total") == 1, "\(simMetrics)")
    }
}
