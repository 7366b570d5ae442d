import Foundation
import Push
import Testing

@testable import APNs

@Suite("Content-free signal: payload bytes, headers and validation")
struct ContentFreeSignalTests {
    let now = Date(timeIntervalSince1970: 1_700_000_000)
    let apnsID = UUID(uuidString: "9E8F7A6B-5C4D-4E3F-8A1B-0C2D3E4F5A6B")!

    private func text(_ signal: ContentFreeSignal) -> String { String(decoding: signal.payload, as: UTF8.self) }

    @Test func backgroundPayloadBytes() throws {
        #expect(text(.background()) == #"{"aps":{"content-available":1}}"#)
        let signal = ContentFreeSignal.background(
            alias: try DeviceAlias("Ab_-9z"), tag: try StateTag("q1w2e3r4t5y6u7i8"))
        #expect(text(signal) == #"{"aps":{"content-available":1},"acct":"Ab_-9z","st":"q1w2e3r4t5y6u7i8"}"#)
        let stateOnly = try ContentFreeSignal(alias: nil, tag: "Z9_-x8Y7w6V5u4T3")
        #expect(text(stateOnly) == #"{"aps":{"content-available":1},"st":"Z9_-x8Y7w6V5u4T3"}"#)
    }

    @Test func badgePayloadBytes() throws {
        let both = try ContentFreeSignal(badge: 3, alias: "acct01", tag: "q1w2e3r4t5y6u7i8")
        #expect(text(both) == #"{"aps":{"badge":3,"content-available":1},"acct":"acct01","st":"q1w2e3r4t5y6u7i8"}"#)
        let badgeOnly = try ContentFreeSignal(badge: 0, contentAvailable: false)
        #expect(text(badgeOnly) == #"{"aps":{"badge":0}}"#)
        let large = try ContentFreeSignal(badge: 120_000, contentAvailable: false, alias: "x", tag: nil)
        #expect(text(large) == #"{"aps":{"badge":120000},"acct":"x"}"#)
    }

    @Test func backgroundHeaders() throws {
        let notification = try APNsNotification(
            deviceToken: testDeviceToken(1), signal: .background(), topic: testTopic, apnsID: apnsID)
        let headers = notification.headers(now: now)
        #expect(headers.map(\.name) == ["apns-push-type", "apns-priority", "apns-topic", "apns-expiration", "apns-id"])
        #expect(
            headers.map(\.value) == [
                "background", "5", "com.example.signalfetch", "1700003600", "9e8f7a6b-5c4d-4e3f-8a1b-0c2d3e4f5a6b",
            ])
        #expect(notification.path == "/3/device/" + String(repeating: "ab", count: 28) + "00000001")
    }

    @Test func badgeHeadersAndPriorities() throws {
        let signal = try ContentFreeSignal(badge: 2)
        let alert = try APNsNotification(
            deviceToken: testDeviceToken(2), signal: signal, topic: testTopic, expiration: .immediately,
            collapseID: try CollapseID("account-1_badge"), apnsID: apnsID)
        let fields = Dictionary(uniqueKeysWithValues: alert.headers(now: now).map { ($0.name, $0.value) })
        #expect(fields["apns-push-type"] == "alert")
        #expect(fields["apns-priority"] == "10")
        #expect(fields["apns-expiration"] == "0")
        #expect(fields["apns-collapse-id"] == "account-1_badge")
        let quiet = try APNsNotification(
            deviceToken: testDeviceToken(2), signal: signal, topic: testTopic, expiration: .at(unixSeconds: 1234),
            priority: .conservePower)
        let quietFields = Dictionary(uniqueKeysWithValues: quiet.headers(now: now).map { ($0.name, $0.value) })
        #expect(quietFields["apns-priority"] == "5")
        #expect(quietFields["apns-expiration"] == "1234")
        #expect(quietFields["apns-collapse-id"] == nil)
    }

    @Test func backgroundRefusesPriority10() {
        #expect(throws: APNsValidationError.backgroundRequiresPriority5) {
            try APNsNotification(
                deviceToken: testDeviceToken(3), signal: .background(), topic: testTopic, priority: .immediate)
        }
        #expect(throws: APNsValidationError.invalidExpiration) {
            try APNsNotification(
                deviceToken: testDeviceToken(3), signal: .background(), topic: testTopic,
                expiration: .at(unixSeconds: -1))
        }
    }

    @Test func signalNeedsBadgeOrContentAvailable() {
        #expect(throws: APNsValidationError.emptySignal) { try ContentFreeSignal(badge: nil, contentAvailable: false) }
        #expect(throws: APNsValidationError.negativeBadge) { try ContentFreeSignal(badge: -1) }
    }

    @Test(arguments: [
        "", String(repeating: "a", count: 65), "a b", "a.b", "a/b", "a+b", "a=b", "é", "\"", "a\nb", "{}",
    ])
    func aliasRejects(_ value: String) {
        #expect(throws: SignalFieldError.invalidAlias) { try DeviceAlias(value) }
        #expect(throws: APNsValidationError.invalidAlias) { try ContentFreeSignal(alias: value, tag: nil) }
    }

    @Test func aliasAccepts() throws {
        _ = try DeviceAlias(String(repeating: "Z", count: 64))
        _ = try DeviceAlias("0123456789abcdefABCDEF_-")
    }

    @Test(arguments: [
        "", String(repeating: "a", count: 15), String(repeating: "a", count: 17), "0123456789abcde.",
        "0123456789 abcde",
        "0123456789abcd\"x", "0123456789abcdé",
    ])
    func stateRejects(_ value: String) {
        #expect(throws: SignalFieldError.invalidStateTag) { try StateTag(value) }
        #expect(throws: APNsValidationError.invalidState) { try ContentFreeSignal(alias: nil, tag: value) }
    }

    @Test func stateAccepts() throws {
        _ = try StateTag(String(repeating: "f", count: 16))
        _ = try StateTag("0123456789AZaz_-")
    }

    @Test func deviceTokenValidation() throws {
        #expect(try DeviceToken(String(repeating: "AB", count: 32)).hex == String(repeating: "ab", count: 32))
        for bad in [
            "", "abc", String(repeating: "g", count: 64), String(repeating: "a", count: 63),
            String(repeating: "a", count: 202), "../" + String(repeating: "a", count: 62),
        ] {
            #expect(throws: APNsValidationError.invalidDeviceToken) { try DeviceToken(bad) }
        }
    }

    @Test func collapseIDAndTopicValidation() throws {
        _ = try CollapseID(String(repeating: "c", count: 64))
        for bad in ["", String(repeating: "c", count: 65), "a b", "a:b", "a.b", "é", "a\r\nx: y"] {
            #expect(throws: APNsValidationError.invalidCollapseID) { try CollapseID(bad) }
        }
        for bad in ["", "com example", String(repeating: "a", count: 256), "a\nb"] {
            #expect(throws: APNsValidationError.invalidTopic) { try APNsTopic(bad) }
        }
    }

    @Test func validationErrorsDoNotEchoValues() {
        do {
            _ = try DeviceAlias("secret subject line")
            Issue.record("expected a throw")
        } catch {
            #expect(!"\(error)".contains("secret"))
        }
    }
}
