import FCMSimulator
import Foundation
import SimulatorSupport
import Testing

@Suite struct FCMGatewayTests {
    @Test func aSendReachesTheConnectedDevice() throws {
        let harness = GatewayHarness()
        let device = try harness.register()
        #expect(device.count == 163)
        #expect(device.contains(":APA91b"))
        let sink = harness.connect(device)
        let token = try harness.accessToken()
        let response = harness.send(
            harness.message(
                to: device, data: #"{"acct":"a1","st":"tag"}"#, android: #"{"priority":"high","ttl":"60s"}"#),
            accessToken: token)
        #expect(response.status == 200)
        let name = try #require(response.json?["name"] as? String)
        #expect(name.hasPrefix("projects/\(GatewayHarness.project)/messages/0:"))
        let event = try #require(sink.received.first)
        #expect(event["data"] as? [String: String] == ["acct": "a1", "st": "tag"])
        #expect(event["priority"] as? String == "high")
        #expect(event["ttl"] as? Double == 60)
        #expect(event["collapseKey"] is NSNull)
        #expect(name == "projects/\(GatewayHarness.project)/messages/\(event["messageId"] as? String ?? "")")
        let entry = try #require(harness.gateway.logEntries().last)
        #expect(entry.kind == "send")
        #expect(entry.outcome == .delivered)
        #expect(entry.token == device)
        #expect(entry.project == GatewayHarness.project)
        #expect(entry.clientEmail == harness.account.clientEmail)
        #expect(entry.body?.contains(#""st":"tag""#) == true)
        #expect(harness.gateway.devices().first?.delivered == 1)
    }

    @Test func deviceErrorsHaveFCMsCodes() throws {
        let harness = GatewayHarness()
        let token = try harness.accessToken()
        let live = try harness.register()
        let gone = try harness.register()
        let foreign = try harness.register(project: GatewayHarness.otherProject)
        #expect(harness.gateway.unregisterDevice(gone))
        #expect(!harness.gateway.unregisterDevice(gone))

        // A token one character off a live one (never the live one itself).
        let unknown = harness.send(
            harness.message(to: (live.first == "x" ? "y" : "x") + live.dropFirst()), accessToken: token)
        #expect(unknown.status == 400)
        #expect(unknown.errorCode == "INVALID_ARGUMENT")
        #expect(unknown.error?["message"] as? String == "The registration token is not a valid FCM registration token")
        let unregistered = harness.send(harness.message(to: gone), accessToken: token)
        #expect(unregistered.status == 404)
        #expect(unregistered.error?["status"] as? String == "NOT_FOUND")
        #expect(unregistered.errorCode == "UNREGISTERED")
        let mismatch = harness.send(harness.message(to: foreign), accessToken: token)
        #expect(mismatch.status == 403)
        #expect(mismatch.error?["status"] as? String == "PERMISSION_DENIED")
        #expect(mismatch.errorCode == "SENDER_ID_MISMATCH")
        // Tokens are case-sensitive, as FCM's are.
        #expect(harness.send(harness.message(to: live.uppercased()), accessToken: token).status == 400)

        let log = harness.gateway.logEntries().filter { $0.kind == "send" }
        #expect(log.map(\.errorCode) == ["INVALID_ARGUMENT", "UNREGISTERED", "SENDER_ID_MISMATCH", "INVALID_ARGUMENT"])
        #expect(log.allSatisfy { $0.outcome == .refused })
        let metrics = harness.gateway.metrics
        #expect(metrics.responses[.init(status: 404, errorCode: "UNREGISTERED")] == 1)
    }

    @Test func projectsAndAccessTokensMustMatch() throws {
        let harness = GatewayHarness()
        let device = try harness.register()
        let otherToken = try harness.accessToken(for: harness.otherAccount)
        let denied = harness.send(harness.message(to: device), accessToken: otherToken)
        #expect(denied.status == 403)
        #expect(denied.error?["status"] as? String == "PERMISSION_DENIED")
        #expect(denied.errorInfoReason == "IAM_PERMISSION_DENIED")
        let unknownProject = harness.send(harness.message(to: device), project: "nope", accessToken: otherToken)
        #expect(unknownProject.status == 404)
        #expect(unknownProject.error?["status"] as? String == "NOT_FOUND")
        #expect(harness.gateway.registerDevice(app: "com.example.mail", project: "nope") == nil)
        let badPath = harness.gateway.handle(
            SimulatorProviderRequest(
                method: "POST", path: "/v1/projects/x/messages:batchSend", headers: [], body: Data()))
        #expect(badPath.status == 404)
    }

    @Test func validateOnlyChecksWithoutDelivering() throws {
        let harness = GatewayHarness()
        let device = try harness.register()
        let sink = harness.connect(device)
        let token = try harness.accessToken()
        let response = harness.send(
            #"{"validate_only":true,"message":{"token":"\#(device)","data":{"a":"b"}}}"#, accessToken: token)
        #expect(response.status == 200)
        #expect(response.json?["name"] as? String == "projects/\(GatewayHarness.project)/messages/fake_message_id")
        #expect(sink.received.isEmpty)
        #expect(harness.gateway.logEntries().last?.outcome == .validated)
        let topic = harness.send(#"{"message":{"topic":"news","data":{"a":"b"}}}"#, accessToken: token)
        #expect(topic.status == 200)
        #expect(harness.gateway.logEntries().last?.outcome == .accepted)
    }

    @Test func quotasAnswer429WithRetryAfter() throws {
        let harness = GatewayHarness {
            $0.projectQuotaPerMinute = 3
            $0.deviceRatePerMinute = 2
        }
        // Align to the start of a minute so the windows do not roll over mid-test.
        harness.clock.set(
            Date(timeIntervalSince1970: 1_800_000_000 - 1_800_000_000.truncatingRemainder(dividingBy: 60) + 60))
        let token = try harness.accessToken()
        let first = try harness.register()
        let second = try harness.register()
        #expect(harness.send(harness.message(to: first), accessToken: token).status == 200)
        #expect(harness.send(harness.message(to: first), accessToken: token).status == 200)
        let deviceRate = harness.send(harness.message(to: first), accessToken: token)
        #expect(deviceRate.status == 429)
        #expect(deviceRate.error?["status"] as? String == "RESOURCE_EXHAUSTED")
        #expect(deviceRate.errorCode == "QUOTA_EXCEEDED")
        #expect(deviceRate.header("retry-after") == "60")
        let projectQuota = harness.send(harness.message(to: second), accessToken: token)
        #expect(projectQuota.status == 429)
        #expect(projectQuota.errorCode == "QUOTA_EXCEEDED")
        harness.clock.advance(by: 15)
        #expect(harness.send(harness.message(to: second), accessToken: token).header("retry-after") == "45")
        harness.clock.advance(by: 45)
        #expect(harness.send(harness.message(to: second), accessToken: token).status == 200)
    }

    @Test func scriptedErrorsAndFaults() throws {
        let harness = GatewayHarness()
        let token = try harness.accessToken()
        let device = try harness.register()
        #expect(
            harness.gateway.scriptError(
                FCMScriptedError(status: 503, errorCode: .unavailable, count: 2, retryAfter: 7), for: device))
        let first = harness.send(harness.message(to: device), accessToken: token)
        #expect(first.status == 503)
        #expect(first.error?["status"] as? String == "UNAVAILABLE")
        #expect(first.errorCode == "UNAVAILABLE")
        #expect(first.header("retry-after") == "7")
        #expect(harness.send(harness.message(to: device), accessToken: token).status == 503)
        #expect(harness.send(harness.message(to: device), accessToken: token).status == 200)
        #expect(harness.gateway.logEntries().filter { $0.events.first?.detail == "scripted" }.count == 2)
        #expect(harness.gateway.scriptError(FCMScriptedError(status: 500, errorCode: .internal), for: device))
        #expect(harness.send(harness.message(to: device), accessToken: token).status == 500)
        #expect(harness.gateway.clearScriptedError(for: device))
        #expect(harness.send(harness.message(to: device), accessToken: token).status == 200)
        #expect(!harness.gateway.scriptError(FCMScriptedError(status: 500, errorCode: .internal), for: "nobody"))

        // Seeded faults replay: the same seed, the same answers.
        func statuses(seed: UInt64) -> [Int] {
            harness.gateway.setFaults(
                SimulatorFaults(dropProbability: 0.2, status429Probability: 0.2, status503Probability: 0.2, seed: seed))
            return (0..<30).map { _ in harness.send(harness.message(to: device), accessToken: token).status }
        }
        let once = statuses(seed: 42)
        #expect(once == statuses(seed: 42))
        #expect(Set(once) == [200, 429, 503])
        #expect(harness.gateway.metrics.dropped > 0)
        harness.gateway.setFaults(SimulatorFaults(status503Probability: 1, latency: .milliseconds(25)))
        let slow = harness.send(harness.message(to: device), accessToken: token)
        #expect(slow.status == 503)
        #expect(slow.delay == .milliseconds(25))
    }
}
