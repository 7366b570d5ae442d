import APNsSimulator
import Foundation
import OpenSSLCrypto
import TestSupport
import Testing

/// One test per APNs error reason, over real HTTP/2 (curl) against an in-process simulator.
@Suite("Provider API errors")
struct ProviderErrorTests {
    /// Sends a request that breaks exactly one rule and checks status, reason and `apns-id`.
    private func expectRefusal(
        _ reason: RejectionReason, _ send: (SimulatorHarness, String) async throws -> PushResult
    ) async throws {
        let harness = try await SimulatorHarness()
        let token = try await harness.registerDevice()
        let result = try await send(harness, token)
        await harness.stop()
        #expect(result.status == reason.status)
        #expect(result.reason == reason.rawValue)
        #expect(result.json.keys.sorted() == ["reason"])
        let apnsID = try #require(result.apnsID)
        #expect(UUID(uuidString: apnsID) != nil)
    }

    @Test func methodNotAllowed() async throws {
        try await expectRefusal(.methodNotAllowed) { harness, token in
            try await harness.push(to: token, method: "GET", body: nil)
        }
    }

    @Test func badPath() async throws {
        try await expectRefusal(.badPath) { harness, token in
            try await harness.push(to: token, path: "/4/device/\(token)")
        }
    }

    @Test func missingDeviceToken() async throws {
        try await expectRefusal(.missingDeviceToken) { harness, _ in try await harness.push(to: "", path: "/3/device/")
        }
    }

    @Test func badDeviceTokenMalformed() async throws {
        try await expectRefusal(.badDeviceToken) { harness, _ in try await harness.push(to: "abc123") }
    }

    @Test func badDeviceTokenNeverRegistered() async throws {
        try await expectRefusal(.badDeviceToken) { harness, _ in try await harness.push(to: SecureRandom.hex(32)) }
    }

    @Test func missingTopic() async throws {
        try await expectRefusal(.missingTopic) { harness, token in try await harness.push(to: token, headers: []) }
    }

    @Test func badTopic() async throws {
        try await expectRefusal(.badTopic) { harness, token in
            try await harness.push(to: token, headers: [("apns-topic", "com.example/mail")])
        }
    }

    @Test func topicDisallowed() async throws {
        try await expectRefusal(.topicDisallowed) { harness, token in
            try await harness.push(to: token, headers: [("apns-topic", "com.someone.else")])
        }
    }

    @Test func deviceTokenNotForTopic() async throws {
        try await expectRefusal(.deviceTokenNotForTopic) { harness, token in
            try await harness.push(to: token, headers: [("apns-topic", "com.example.other")])
        }
    }

    @Test func duplicateHeaders() async throws {
        try await expectRefusal(.duplicateHeaders) { harness, token in
            try await harness.push(
                to: token,
                headers: [
                    ("apns-topic", SimulatorHarness.topic), ("apns-priority", "10"),
                    ("apns-priority", "5"),
                ])
        }
    }

    @Test func missingProviderToken() async throws {
        try await expectRefusal(.missingProviderToken) { harness, token in
            try await harness.push(to: token, authorization: .some(nil))
        }
    }

    @Test func invalidProviderTokenWrongKey() async throws {
        try await expectRefusal(.invalidProviderToken) { harness, token in
            let forged = try harness.providerToken(key: try P256PrivateKey())
            return try await harness.push(to: token, authorization: "bearer \(forged)")
        }
    }

    @Test func invalidProviderTokenUnknownKeyID() async throws {
        try await expectRefusal(.invalidProviderToken) { harness, token in
            try await harness.push(to: token, authorization: "bearer \(try harness.providerToken(keyID: "OTHERKEY00"))")
        }
    }

    @Test func expiredProviderToken() async throws {
        try await expectRefusal(.expiredProviderToken) { harness, token in
            try await harness.push(to: token, authorization: "bearer \(try harness.providerToken(age: 3700))")
        }
    }

    @Test func tooManyProviderTokenUpdates() async throws {
        try await expectRefusal(.tooManyProviderTokenUpdates) { harness, token in
            let first = try await harness.push(
                to: token, authorization: "bearer \(try harness.providerToken(age: 120))")
            let second = try await harness.push(
                to: token, authorization: "bearer \(try harness.providerToken(age: 60))")
            // An invalid token and an expired one do not count as updates.
            let forged = try harness.providerToken(key: try P256PrivateKey())
            _ = try await harness.push(to: token, authorization: "bearer \(forged)")
            #expect(first.status == 200)
            #expect(second.status == 200)
            // The first token is still usable: reusing an older token is not an update.
            let reused = try await harness.push(
                to: token, authorization: "bearer \(try harness.providerToken(age: 120))")
            #expect(reused.status == 200)
            return try await harness.push(to: token, authorization: "bearer \(try harness.providerToken(age: 0))")
        }
    }

    @Test func badPriority() async throws {
        try await expectRefusal(.badPriority) { harness, token in
            try await harness.push(
                to: token, headers: [("apns-topic", SimulatorHarness.topic), ("apns-priority", "7")])
        }
    }

    @Test func invalidPushTypeBackgroundAtPriority10() async throws {
        try await expectRefusal(.invalidPushType) { harness, token in
            try await harness.push(
                to: token, headers: [("apns-topic", SimulatorHarness.topic), ("apns-push-type", "background")],
                body: #"{"aps":{"content-available":1}}"#)
        }
    }

    @Test func invalidPushTypeBackgroundWithoutContentAvailable() async throws {
        try await expectRefusal(.invalidPushType) { harness, token in
            try await harness.push(
                to: token,
                headers: [
                    ("apns-topic", SimulatorHarness.topic), ("apns-push-type", "background"), ("apns-priority", "5"),
                ],
                body: #"{"aps":{"badge":2}}"#)
        }
    }

    @Test func invalidPushTypeUnknown() async throws {
        try await expectRefusal(.invalidPushType) { harness, token in
            try await harness.push(
                to: token, headers: [("apns-topic", SimulatorHarness.topic), ("apns-push-type", "loud")])
        }
    }

    @Test func badExpirationDate() async throws {
        try await expectRefusal(.badExpirationDate) { harness, token in
            try await harness.push(
                to: token, headers: [("apns-topic", SimulatorHarness.topic), ("apns-expiration", "soon")])
        }
    }

    @Test func badCollapseId() async throws {
        try await expectRefusal(.badCollapseId) { harness, token in
            try await harness.push(
                to: token,
                headers: [
                    ("apns-topic", SimulatorHarness.topic), ("apns-collapse-id", String(repeating: "c", count: 65)),
                ])
        }
    }

    @Test func badMessageId() async throws {
        try await expectRefusal(.badMessageId) { harness, token in
            let result = try await harness.push(
                to: token, headers: [("apns-topic", SimulatorHarness.topic), ("apns-id", "not-a-uuid")])
            #expect(result.apnsID != "not-a-uuid")
            return result
        }
    }

    @Test func payloadEmpty() async throws {
        try await expectRefusal(.payloadEmpty) { harness, token in try await harness.push(to: token, body: "") }
    }

    @Test func payloadTooLarge() async throws {
        try await expectRefusal(.payloadTooLarge) { harness, token in
            let filler = String(repeating: "x", count: 4096)
            return try await harness.push(to: token, body: #"{"aps":{"badge":1},"pad":"\#(filler)"}"#)
        }
    }

    @Test func badPayload() async throws {
        try await expectRefusal(.badPayload) { harness, token in try await harness.push(to: token, body: "[1,2,3]") }
    }

    @Test func unregisteredWithTimestamp() async throws {
        let harness = try await SimulatorHarness()
        let registeredAt = Int64(harness.clock.now().timeIntervalSince1970 * 1000)
        let token = try await harness.registerDevice()
        harness.clock.advance(by: 5)
        let deleted = try await runTool(
            harness.curl,
            [
                "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "DELETE",
                "\(harness.deviceURL)/sim/devices/\(token)",
            ])
        let result = try await harness.push(to: token)
        await harness.stop()
        #expect(deleted.stdout == "204")
        #expect(result.status == 410)
        #expect(result.reason == "Unregistered")
        let timestamp = try #require(result.json["timestamp"] as? Int64)
        #expect(timestamp > registeredAt)
        #expect(result.apnsID != nil)
    }

    @Test func successEchoesApnsIDAndLogsRedactedHeaders() async throws {
        let harness = try await SimulatorHarness()
        let token = try await harness.registerDevice()
        let apnsID = UUID().uuidString
        let result = try await harness.push(
            to: token, headers: [("apns-topic", SimulatorHarness.topic), ("apns-id", apnsID)])
        let entry = try await harness.logEntry(apnsID)
        await harness.stop()
        #expect(result.status == 200)
        #expect(result.apnsID == apnsID)
        #expect(result.body.isEmpty)
        let headers = try #require(entry?["headers"] as? [String: String])
        #expect(headers["authorization"] == "[redacted]")
        #expect(entry?["payload"] as? String == #"{"aps":{"badge":1}}"#)
        #expect(entry?["outcome"] as? String == "stored")
    }
}
