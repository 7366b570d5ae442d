import APNsSimulator
import Foundation
import TestSupport
import Testing

/// The control API, driven over HTTP with curl the way another team's integration test would drive it.
@Suite("Control API")
struct ControlAPITests {
    @Test func faultsTakeEffectAtOnceAndCanBeCleared() async throws {
        let harness = try await SimulatorHarness()
        let token = try await harness.registerDevice()
        let before = try await harness.push(to: token)
        let set = try await harness.control("PUT", "/sim/faults", body: #"{"status503": 1, "seed": 9}"#)
        let refused = try await harness.push(to: token)
        let read = try await harness.control("GET", "/sim/faults")
        let cleared = try await harness.control("PUT", "/sim/faults", body: "{}")
        let after = try await harness.push(to: token)
        await harness.stop()

        #expect(before.status == 200)
        #expect(set.status == 200)
        #expect(set.json["status503"] as? Double == 1 && set.json["seed"] as? Int == 9)
        #expect(refused.status == 503 && refused.reason == "ServiceUnavailable")
        #expect(read.json["status503"] as? Double == 1 && read.json["drop"] as? Double == 0)
        #expect(cleared.status == 200 && cleared.json["status503"] as? Double == 0)
        #expect(cleared.json["seed"] is NSNull, "no seed given: a random one")
        #expect(after.status == 200)
    }

    @Test func latencyAndGoAwayAreSetAtRunTime() async throws {
        let harness = try await SimulatorHarness()
        let token = try await harness.registerDevice()
        let set = try await harness.control("PUT", "/sim/faults", body: #"{"latencyMs": 300, "goawayAfter": 5}"#)
        let started = ContinuousClock.now
        let slow = try await harness.push(to: token)
        let elapsed = ContinuousClock.now - started
        let faults = harness.server.gateway.faults
        await harness.stop()
        #expect(set.status == 200 && set.json["latencyMs"] as? Int == 300 && set.json["goawayAfter"] as? Int == 5)
        #expect(slow.status == 200)
        #expect(elapsed >= .milliseconds(300))
        #expect(faults.goAwayAfterStreams == 5 && faults.common.latency == .milliseconds(300))
    }

    @Test func badFaultsAreRefusedAndChangeNothing() async throws {
        let harness = try await SimulatorHarness()
        _ = try await harness.control("PUT", "/sim/faults", body: #"{"drop": 0.25, "seed": 1}"#)
        let bodies: [(String, String)] = [
            (#"{"drop": 2}"#, "invalidRequest"),
            (#"{"drop": -0.1}"#, "invalidRequest"),
            (#"{"drop": 0.6, "status429": 0.6}"#, "invalidRequest"),
            (#"{"status503": "often"}"#, "invalidRequest"),
            (#"{"latencyMs": -1}"#, "invalidRequest"),
            (#"{"latencyMs": 1.5}"#, "invalidRequest"),
            (#"{"goawayAfter": -3}"#, "invalidRequest"),
            (#"{"seed": -1}"#, "invalidRequest"),
            (#"{"dropp": 0.5}"#, "unknownField"),
            (#"[0.5]"#, "invalidRequest"),
            ("not json", "invalidJSON"),
        ]
        var answers: [(Int, String?, String?)] = []
        for (body, _) in bodies {
            let result = try await harness.control("PUT", "/sim/faults", body: body)
            answers.append((result.status, result.json["error"] as? String, result.json["message"] as? String))
        }
        let faults = harness.server.gateway.faults
        await harness.stop()
        for ((body, code), answer) in zip(bodies, answers) {
            #expect(answer.0 == 400, "\(body)")
            #expect(answer.1 == code, "\(body)")
            #expect(answer.2?.isEmpty == false, "\(body)")
        }
        #expect(faults == APNsFaults(SimulatorFaults(dropProbability: 0.25, seed: 1)))
    }

    @Test func aScriptedErrorAnswersTheNextSendsThenStops() async throws {
        let harness = try await SimulatorHarness()
        let token = try await harness.registerDevice()
        let stream = try await harness.openStream(token)
        let scripted = try await harness.control(
            "PUT", "/sim/devices/\(token)/error", body: #"{"status": 410, "reason": "Unregistered", "count": 2}"#)
        let first = try await harness.push(to: token)
        let second = try await harness.push(to: token)
        let third = try await harness.push(to: token)
        let events = await waitForEvents(stream, count: 1)
        let entry = try await harness.logEntry(first.apnsID)
        stream.stop(signal: SIGKILL)
        await harness.stop()

        #expect(scripted.status == 200 && scripted.json["reason"] as? String == "Unregistered")
        for result in [first, second] {
            #expect(result.status == 410 && result.reason == "Unregistered")
            #expect((result.json["timestamp"] as? Int ?? 0) > 0, "410 carries the time the token stopped being valid")
        }
        #expect(third.status == 200)
        #expect(events.count == 1)
        #expect(entry?["outcome"] as? String == "refused")
        #expect((entry?["events"] as? [[String: Any]])?.first?["detail"] as? String == "scripted")
    }

    @Test func aScriptedErrorWithoutCountHoldsUntilDeleted() async throws {
        let harness = try await SimulatorHarness()
        let token = try await harness.registerDevice()
        _ = try await harness.control(
            "PUT", "/sim/devices/\(token)/error", body: #"{"status": 429, "reason": "TooManyRequests"}"#)
        var statuses: [Int] = []
        for _ in 0..<3 { statuses.append(try await harness.push(to: token).status) }
        let listed = try await harness.control("GET", "/sim/devices")
        let deleted = try await harness.control("DELETE", "/sim/devices/\(token)/error")
        let after = try await harness.push(to: token)
        await harness.stop()
        #expect(statuses == [429, 429, 429])
        let device = (listed.json["devices"] as? [[String: Any]])?.first
        #expect(device?["scriptedError"] as? String == "TooManyRequests")
        #expect(deleted.status == 204)
        #expect(after.status == 200)
    }

    @Test func badScriptedErrorsAreRefused() async throws {
        let harness = try await SimulatorHarness()
        let token = try await harness.registerDevice()
        let cases: [(String, String, Int, String)] = [
            (token, #"{"status": 400, "reason": "Unregistered"}"#, 400, "invalidRequest"),
            (token, #"{"status": 400, "reason": "NoSuchReason"}"#, 400, "invalidRequest"),
            (token, #"{"status": 410, "reason": "Unregistered", "count": 0}"#, 400, "invalidRequest"),
            (token, #"{"reason": "Unregistered"}"#, 400, "invalidRequest"),
            (token, #"{"status": 410, "reason": "Unregistered", "when": 1}"#, 400, "unknownField"),
            (String(repeating: "ab", count: 32), #"{"status": 410, "reason": "Unregistered"}"#, 404, "notFound"),
        ]
        var answers: [(Int, String?)] = []
        for (target, body, _, _) in cases {
            let result = try await harness.control("PUT", "/sim/devices/\(target)/error", body: body)
            answers.append((result.status, result.json["error"] as? String))
        }
        let unknownDelete = try await harness.control(
            "DELETE", "/sim/devices/\(String(repeating: "cd", count: 32))/error")
        let push = try await harness.push(to: token)
        await harness.stop()
        for (expected, answer) in zip(cases, answers) {
            #expect(answer.0 == expected.2, "\(expected.1)")
            #expect(answer.1 == expected.3, "\(expected.1)")
        }
        #expect(unknownDelete.status == 404)
        #expect(push.status == 200, "a refused script leaves the device alone")
    }

    @Test func anOfflineDeviceGetsTheLastNotificationWhenItComesBack() async throws {
        let harness = try await SimulatorHarness()
        let token = try await harness.registerDevice()
        let stream = try await harness.openStream(token)
        let offline = try await harness.control("PUT", "/sim/devices/\(token)/online", body: #"{"online": false}"#)
        let first = try await harness.push(to: token, body: #"{"aps":{"badge":1}}"#)
        let second = try await harness.push(to: token, body: #"{"aps":{"badge":2}}"#)
        let listedOffline = try await harness.control("GET", "/sim/devices")
        let online = try await harness.control("PUT", "/sim/devices/\(token)/online", body: #"{"online": true}"#)
        let listedOnline = try await harness.control("GET", "/sim/devices")
        // A notification sent once it is online arrives after whatever the device was holding.
        let third = try await harness.push(to: token, body: #"{"aps":{"badge":3}}"#)
        let events = await waitForEvents(stream, count: 2)
        let firstEntry = try await harness.logEntry(first.apnsID)
        stream.stop(signal: SIGKILL)
        await harness.stop()

        #expect(offline.status == 200 && online.status == 200)
        #expect(first.status == 200 && second.status == 200 && third.status == 200)
        let device = (listedOffline.json["devices"] as? [[String: Any]])?.first
        #expect(
            device?["online"] as? Bool == false && device?["stored"] as? Int == 1 && device?["streams"] as? Int == 1)
        #expect(device?["delivered"] as? Int == 0, "nothing reaches an offline device")
        // The stored notification (the last of the two) first, then the one sent online: only the last is kept.
        let badges = events.map { ((($0["payload"] as? [String: Any])?["aps"] as? [String: Any])?["badge"] as? Int) }
        #expect(badges == [2, 3], "\(events)")
        #expect(events.map { $0["apnsId"] as? String } == [second.apnsID, third.apnsID])
        #expect(firstEntry?["outcome"] as? String == "coalesced")
        let back = (listedOnline.json["devices"] as? [[String: Any]])?.first
        #expect(back?["online"] as? Bool == true && back?["stored"] as? Int == 0 && back?["delivered"] as? Int == 1)
    }

    @Test func badOnlineRequestsAreRefused() async throws {
        let harness = try await SimulatorHarness()
        let token = try await harness.registerDevice()
        let wrongType = try await harness.control("PUT", "/sim/devices/\(token)/online", body: #"{"online": "no"}"#)
        let missing = try await harness.control("PUT", "/sim/devices/\(token)/online", body: "{}")
        let unknown = try await harness.control(
            "PUT", "/sim/devices/\(String(repeating: "ef", count: 32))/online", body: #"{"online": false}"#)
        _ = try await harness.control("DELETE", "/sim/devices/\(token)")
        let deleted = try await harness.control("PUT", "/sim/devices/\(token)/online", body: #"{"online": false}"#)
        await harness.stop()
        #expect(wrongType.status == 400 && wrongType.json["error"] as? String == "invalidRequest")
        #expect(missing.status == 400 && missing.json["error"] as? String == "invalidRequest")
        #expect(unknown.status == 404 && unknown.json["error"] as? String == "notFound")
        #expect(deleted.status == 410 && deleted.json["error"] as? String == "unregistered")
    }

    @Test func theDeviceListShowsEachDevicesEnvironmentTopicAndCounts() async throws {
        let harness = try await SimulatorHarness(sandbox: true)
        let mail = try await harness.registerDevice(environment: "production")
        let other = try await harness.registerDevice(topic: "com.example.other", environment: "sandbox")
        let gone = try await harness.registerDevice()
        let stream = try await harness.openStream(mail)
        _ = try await harness.push(to: mail)
        _ = try await harness.push(to: mail)
        _ = try await harness.push(to: other, headers: [("apns-topic", "com.example.other")], sandbox: true)
        _ = try await harness.control("DELETE", "/sim/devices/\(gone)")
        _ = await waitForEvents(stream, count: 2)
        let listed = try await harness.control("GET", "/sim/devices")
        stream.stop(signal: SIGKILL)
        await harness.stop()

        #expect(listed.status == 200)
        let devices = try #require(listed.json["devices"] as? [[String: Any]])
        #expect(devices.map { $0["token"] as? String } == [mail, other], "deleted devices are not listed")
        #expect(
            devices[0]["environment"] as? String == "production" && devices[0]["topic"] as? String == "com.example.mail"
        )
        #expect(devices[0]["delivered"] as? Int == 2 && devices[0]["stored"] as? Int == 0)
        #expect(
            devices[1]["environment"] as? String == "sandbox" && devices[1]["topic"] as? String == "com.example.other")
        #expect(devices[1]["delivered"] as? Int == 0 && devices[1]["stored"] as? Int == 1, "no stream: stored")
    }

    @Test func clearingTheLogKeepsNumberingAndLaterOutcomes() async throws {
        let harness = try await SimulatorHarness()
        let token = try await harness.registerDevice()
        _ = try await harness.push(to: token)
        _ = try await harness.push(to: token)
        let before = try await harness.log()
        let cleared = try await harness.control("DELETE", "/sim/log")
        let empty = try await harness.log()
        let stored = try await harness.push(to: token)
        let stream = try await harness.openStream(token)
        _ = await waitForEvents(stream, count: 1)
        let after = try await harness.log()
        stream.stop(signal: SIGKILL)
        await harness.stop()

        #expect(before.count == 2)
        #expect(cleared.status == 204)
        #expect(empty.isEmpty)
        #expect(after.count == 1)
        #expect(after.first?["sequence"] as? Int == 3, "numbering goes on, so readers' 'after' cursors stay valid")
        #expect(after.first?["apnsId"] as? String == stored.apnsID)
        #expect(after.first?["outcome"] as? String == "delivered", "outcomes after the clear are still recorded")
    }

    @Test func aBadLogQueryIsRefusedAndReadsNothing() async throws {
        let harness = try await SimulatorHarness()
        let token = try await harness.registerDevice()
        _ = try await harness.push(to: token)
        var answers: [String: (Int, String?)] = [:]
        for query in ["after=-1", "after=x", "limit=-2", "limit=1.5"] {
            let result = try await harness.control("GET", "/sim/log?\(query)")
            answers[query] = (result.status, result.json["error"] as? String)
        }
        let log = try await harness.log()
        await harness.stop()
        for (query, answer) in answers {
            #expect(answer.0 == 400, "\(query)")
            #expect(answer.1 == "invalidRequest", "\(query)")
        }
        #expect(log.count == 1)
    }
}
