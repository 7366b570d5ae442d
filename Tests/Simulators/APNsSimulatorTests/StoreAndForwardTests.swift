import APNsSimulator
import Foundation
import TestSupport
import Testing

/// Delivery to connected devices, storage for offline ones, collapse and expiration.
@Suite("Store and forward")
struct StoreAndForwardTests {
    private func outcome(_ harness: SimulatorHarness, _ apnsID: String?) async throws -> String? {
        try await harness.logEntry(apnsID)?["outcome"] as? String
    }

    @Test func connectedDeviceReceivesEventWithAllFields() async throws {
        let harness = try await SimulatorHarness()
        let token = try await harness.registerDevice()
        let stream = try await harness.openStream(token)
        let result = try await harness.push(
            to: token,
            headers: [
                ("apns-topic", SimulatorHarness.topic), ("apns-push-type", "alert"), ("apns-collapse-id", "inbox"),
            ],
            body: "{\"aps\":{\"badge\":7},\n \"acct\":\"a1\"}")
        let events = await waitForEvents(stream, count: 1)
        stream.stop(signal: SIGKILL)
        let logged = try await outcome(harness, result.apnsID)
        await harness.stop()
        #expect(result.status == 200)
        let event = try #require(events.first)
        #expect(event["apnsId"] as? String == result.apnsID)
        #expect(event["pushType"] as? String == "alert")
        #expect(event["priority"] as? Int == 10)
        #expect(event["collapseId"] as? String == "inbox")
        let payload = try #require(event["payload"] as? [String: Any])
        #expect((payload["aps"] as? [String: Any])?["badge"] as? Int == 7)
        #expect(payload["acct"] as? String == "a1")
        #expect(logged == "delivered")
    }

    @Test func payloadAtTheSizeLimitReachesTheDeviceIntact() async throws {
        let harness = try await SimulatorHarness()
        let token = try await harness.registerDevice()
        let stream = try await harness.openStream(token)
        // Exactly 4096 bytes: the largest payload APNs accepts, several times a small connection buffer.
        let prefix = #"{"aps":{"badge":1},"filler":""#
        let filler = String(repeating: "abcdefghij", count: 410).prefix(4096 - prefix.utf8.count - 2)
        let body = prefix + filler + #""}"#
        #expect(body.utf8.count == 4096)
        let result = try await harness.push(to: token, body: body)
        let events = await waitForEvents(stream, count: 1)
        stream.stop(signal: SIGKILL)
        await harness.stop()
        #expect(result.status == 200)
        let payload = try #require(events.first?["payload"] as? [String: Any])
        #expect(payload["filler"] as? String == String(filler))
    }

    @Test func offlineDeviceKeepsOnlyTheLastNotification() async throws {
        let harness = try await SimulatorHarness()
        let token = try await harness.registerDevice()
        let first = try await harness.push(
            to: token, headers: [("apns-topic", SimulatorHarness.topic), ("apns-collapse-id", "badge")],
            body: #"{"aps":{"badge":1}}"#)
        let second = try await harness.push(
            to: token, headers: [("apns-topic", SimulatorHarness.topic), ("apns-collapse-id", "badge")],
            body: #"{"aps":{"badge":2}}"#)
        let third = try await harness.push(to: token, body: #"{"aps":{"badge":3}}"#)
        let beforeConnect = [
            try await outcome(harness, first.apnsID), try await outcome(harness, second.apnsID),
            try await outcome(harness, third.apnsID),
        ]
        let stream = try await harness.openStream(token)
        let events = await waitForEvents(stream, count: 1)
        // A later push still arrives on the open stream, after the stored one.
        let fourth = try await harness.push(to: token, body: #"{"aps":{"badge":4}}"#)
        let after = await waitForEvents(stream, count: 2)
        stream.stop(signal: SIGKILL)
        let thirdOutcome = try await outcome(harness, third.apnsID)
        await harness.stop()
        #expect(beforeConnect == ["coalesced", "coalesced", "stored"])
        #expect(events.first?["apnsId"] as? String == third.apnsID)
        #expect(after.count == 2)
        #expect(after.last?["apnsId"] as? String == fourth.apnsID)
        #expect(thirdOutcome == "delivered")
    }

    @Test func expirationZeroIsNeverStored() async throws {
        let harness = try await SimulatorHarness()
        let token = try await harness.registerDevice()
        let result = try await harness.push(
            to: token, headers: [("apns-topic", SimulatorHarness.topic), ("apns-expiration", "0")])
        let stream = try await harness.openStream(token)
        let marker = try await harness.push(to: token, body: #"{"aps":{"badge":9}}"#)
        let events = await waitForEvents(stream, count: 1)
        stream.stop(signal: SIGKILL)
        let logged = try await outcome(harness, result.apnsID)
        await harness.stop()
        #expect(result.status == 200)
        #expect(logged == "dropped")
        #expect(events.map { $0["apnsId"] as? String } == [marker.apnsID])
    }

    @Test func storedNotificationExpires() async throws {
        let harness = try await SimulatorHarness()
        let token = try await harness.registerDevice()
        let expiration = Int64(harness.clock.now().timeIntervalSince1970) + 60
        let result = try await harness.push(
            to: token, headers: [("apns-topic", SimulatorHarness.topic), ("apns-expiration", "\(expiration)")])
        let stored = try await outcome(harness, result.apnsID)
        harness.clock.advance(by: 120)
        harness.server.gateway.processDueWork()
        let stream = try await harness.openStream(token)
        let marker = try await harness.push(to: token, body: #"{"aps":{"badge":9}}"#)
        let events = await waitForEvents(stream, count: 1)
        stream.stop(signal: SIGKILL)
        let expired = try await outcome(harness, result.apnsID)
        await harness.stop()
        #expect(stored == "stored")
        #expect(expired == "expired")
        #expect(events.map { $0["apnsId"] as? String } == [marker.apnsID])
    }

    @Test func storedNotificationWithinExpirationIsDeliveredOnReconnect() async throws {
        let harness = try await SimulatorHarness()
        let token = try await harness.registerDevice()
        let expiration = Int64(harness.clock.now().timeIntervalSince1970) + 600
        let result = try await harness.push(
            to: token, headers: [("apns-topic", SimulatorHarness.topic), ("apns-expiration", "\(expiration)")])
        harness.clock.advance(by: 300)
        let stream = try await harness.openStream(token)
        let events = await waitForEvents(stream, count: 1)
        stream.stop(signal: SIGKILL)
        await harness.stop()
        #expect(events.map { $0["apnsId"] as? String } == [result.apnsID])
    }

    @Test func deletedDeviceStreamEndsAndMetricsCount() async throws {
        let harness = try await SimulatorHarness()
        let token = try await harness.registerDevice()
        let stream = try await harness.openStream(token)
        let connected = harness.server.gateway.metrics.connectedDevices
        _ = try await runTool(harness.curl, ["-s", "-X", "DELETE", "\(harness.deviceURL)/sim/devices/\(token)"])
        let ended = try await offPool { stream.waitForOutput(timeout: 10) { _ in !stream.isRunning } }
        let metrics = try await runTool(harness.curl, ["-s", "\(harness.deviceURL)/metrics"]).stdout
        let health = try await runTool(harness.curl, ["-s", "\(harness.deviceURL)/healthz"]).stdout
        await harness.stop()
        #expect(connected == 1)
        #expect(ended)
        #expect(metrics.contains("apns_sim_connected_devices 0"))
        #expect(metrics.contains("apns_sim_registered_devices 0"))
        #expect(health.contains("ok"))
    }
}
