import Foundation
import OpenSSLCrypto
import Push
import Testing

@testable import PushFCM

/// The data-only message a signal becomes, byte for byte, and the guard on its bytes.
@Suite("FCM message")
struct FCMMessageTests {
    static let token = "dGVzdC10b2tlbg:APA91b" + String(repeating: "Xy_-", count: 30)
    static let alias = try! DeviceAlias("Ab_-9zAb_-9zAb_-")
    static let tag = try! StateTag("q1w2e3r4t5y6u7i8")

    func text(_ signal: PushSignal) -> String {
        String(decoding: FCMMessage(token: Self.token, signal: signal).body, as: UTF8.self)
    }

    @Test func aBackgroundSignalIsDataOnlyAtNormalPriority() throws {
        let body = text(try PushSignal(alias: Self.alias, tag: Self.tag, badge: nil))
        #expect(
            body == #"{"message":{"token":"\#(Self.token)","data":{"acct":"Ab_-9zAb_-9zAb_-","st":"q1w2e3r4t5y6u7i8"},"#
                + #""android":{"priority":"normal","collapse_key":"Ab_-9zAb_-9zAb_-","ttl":"3600s"}}}"#)
        #expect(!body.contains("notification"))
    }

    @Test func aBadgeSignalCarriesTheCountAsAStringAtHighPriority() throws {
        let body = text(try PushSignal(alias: Self.alias, tag: Self.tag, badge: 12))
        #expect(body.contains(#""data":{"acct":"Ab_-9zAb_-9zAb_-","st":"q1w2e3r4t5y6u7i8","badge":"12"}"#))
        #expect(body.contains(#""priority":"high""#))
    }

    @Test func theGuardPassesEveryMessageItBuilds() throws {
        for badge in [nil, 0, 7, 99_999] {
            for tag in [nil, Self.tag] {
                let body = FCMMessage(
                    token: Self.token, signal: try PushSignal(alias: Self.alias, tag: tag, badge: badge)
                )
                .body
                #expect(throws: Never.self) { try FCMPayloadGuard.check(body) }
            }
        }
    }

    @Test(arguments: [
        #"{"message":{"token":"t","data":{"acct":"a","subject":"Quarterly numbers"}}}"#,
        #"{"message":{"token":"t","data":{"acct":"a"},"notification":{"title":"Hi"}}}"#,
        #"{"message":{"token":"t","data":{"acct":"a","st":"00000000000000a1-42"}}}"#,
        #"{"message":{"token":"t","data":{"acct":"a b"}}}"#,
        #"{"message":{"token":"t","data":{"acct":"a","badge":"3 unread"}}}"#,
        #"{"message":{"token":"t","data":{"acct":"a","badge":3}}}"#,
        #"{"message":{"token":"t","data":{"acct":"a"},"android":{"notification":{"body":"x"}}}}"#,
        #"{"message":{"token":"t","data":{"acct":"a"}},"validate_only":true}"#,
        #"{"message":{"topic":"news","data":{"acct":"a"}}}"#,
    ])
    func theGuardRefusesContentAndStrangers(_ json: String) {
        #expect(throws: FCMPayloadGuard.Violation.self) { try FCMPayloadGuard.check(Array(json.utf8)) }
    }

    @Test func randomContentNeverReachesTheBytes() throws {
        for _ in 0..<200 {
            let secret = "Confidential " + SecureRandom.hex(8) + " from cfo@example.com"
            let alias = try DeviceAlias(SecureRandom.base64URL(12))
            let tag = SignalKey().tag(of: "0123456789abcdef-\(Int.random(in: 0...1_000_000))")
            let body = text(try PushSignal(alias: alias, tag: tag, badge: Int.random(in: 0...500)))
            #expect(!body.contains(secret))
            #expect(!body.contains("0123456789abcdef"), "no epoch")
            #expect(throws: SignalFieldError.self) { try DeviceAlias(secret) }
            #expect(throws: SignalFieldError.self) { try StateTag(secret) }
        }
    }
}
