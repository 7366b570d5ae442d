import Foundation
import OpenSSLCrypto
import Push
import TestSupport
import Testing

@testable import PushWebPush

/// JMAP push subscriptions through the Web Push sender: the same policy and keys checks, a StateChange or a
/// PushVerification encrypted to the subscription and padded to one length, and a guard on the bytes.
@Suite struct WebPushSubscriptionPushTests {
    let vapidKey = try! P256PrivateKey()

    func service(allowing origin: String, caFile: String) throws -> WebPushPushService {
        try WebPushPushService(
            configuration: try WebPushConfiguration(
                vapidKey: vapidKey, subject: "mailto:ops@example.com", caFile: caFile,
                endpointPolicy: WebPushEndpointPolicy(allowedHosts: [String(origin.dropFirst("https://".count))])))
    }

    func keys(of browser: TestSubscription) throws -> (p256dh: String, auth: String) {
        (Base64URL.encode(try browser.key.publicKey.rawRepresentation), Base64URL.encode(browser.auth))
    }

    @Test func aStateChangeAndAVerificationAreEncryptedToTheSubscriptionAtOneLength() async throws {
        let resource = try RecordingPushResource()
        let sender = try service(allowing: resource.origin, caFile: resource.caFile)
        defer { sender.shutdown() }
        let browser = TestSubscription()
        let url = resource.origin + "/push/jmap-1"
        let stored = try sender.checkSubscription(url: url, keys: try keys(of: browser))
        #expect(stored == WebPushSubscriptionKeys(stored: stored)?.stored)
        let change = SubscriptionPushMessage.stateChange(
            accountID: "7", states: ["Email": "00112233445566aa-12", "Thread": "00112233445566aa-9"])
        let verification = SubscriptionPushMessage.verification(subscriptionID: "s-1_x", code: "c0De")
        #expect(await sender.push(change, url: url, keys: stored, topic: "AbCdEfGhIjKlMnOp") == .delivered)
        #expect(await sender.push(verification, url: url, keys: stored, topic: "AbCdEfGhIjKlMnOp") == .delivered)

        let received = resource.received
        try #require(received.count == 2)
        #expect(received.allSatisfy { $0.body.count == SubscriptionPushBody.bodyLength })
        #expect(received.allSatisfy { $0.headers["content-encoding"] == "aes128gcm" })
        #expect(received.allSatisfy { $0.headers["topic"] == "AbCdEfGhIjKlMnOp" })
        #expect(received.allSatisfy { $0.headers["authorization"]?.hasPrefix("vapid t=") == true })
        let texts = try received.map {
            String(
                decoding: try WebPushEncryption.decrypt($0.body, receiverKey: browser.key, authSecret: browser.auth)
                    .plaintext, as: UTF8.self)
        }
        #expect(
            texts[0]
                == #"{"@type":"StateChange","changed":{"7":{"Email":"00112233445566aa-12","Thread":"00112233445566aa-9"}}}"#
        )
        #expect(texts[1] == #"{"@type":"PushVerification","pushSubscriptionId":"s-1_x","verificationCode":"c0De"}"#)
    }

    @Test func withoutKeysTheMessageIsPlainJSON() async throws {
        let resource = try RecordingPushResource()
        let sender = try service(allowing: resource.origin, caFile: resource.caFile)
        defer { sender.shutdown() }
        let url = resource.origin + "/push/plain"
        #expect(try sender.checkSubscription(url: url, keys: nil) == "")
        let message = SubscriptionPushMessage.stateChange(accountID: "1", states: ["Email": "00aa-1"])
        #expect(await sender.push(message, url: url, keys: "", topic: "t") == .delivered)
        let request = try #require(resource.received.first)
        #expect(request.headers["content-encoding"] == nil)
        #expect(request.headers["content-type"] == "application/json; charset=utf-8")
        #expect(
            String(decoding: request.body, as: UTF8.self)
                == #"{"@type":"StateChange","changed":{"1":{"Email":"00aa-1"}}}"#)
    }

    @Test func theURLAndKeysAreCheckedAsABrowserSubscriptionsAre() throws {
        let sender = try service(allowing: "https://push.example.test", caFile: "/nonexistent")
        defer { sender.shutdown() }
        let browser = TestSubscription()
        #expect(throws: RegistrationError.self) {
            try sender.checkSubscription(url: "https://127.0.0.1:9/x", keys: try keys(of: browser))
        }
        #expect(throws: RegistrationError.self) {
            try sender.checkSubscription(url: "http://push.example.test/x", keys: try keys(of: browser))
        }
        do {
            _ = try sender.checkSubscription(url: "https://push.example.test/x", keys: ("bm90IGEga2V5", "c2hvcnQ"))
            Issue.record("malformed keys were accepted")
        } catch {
            #expect(error.code == "invalidKeys")
            #expect(!error.message.contains("bm90IGEga2V5"))
        }
    }

    @Test func aMessageHoldingAnythingButTokensIsNeverMade() {
        #expect(SubscriptionPushMessage.stateChange(accountID: "1", states: [:]).json == nil)
        #expect(SubscriptionPushMessage.stateChange(accountID: "1", states: ["Email": "a\"b"]).json == nil)
        #expect(SubscriptionPushMessage.stateChange(accountID: "a b", states: ["Email": "s"]).json == nil)
        #expect(
            SubscriptionPushMessage.verification(subscriptionID: "x", code: String(repeating: "c", count: 65)).json
                == nil)
        #expect(SubscriptionPushMessage.verification(subscriptionID: "x", code: "alice@example.com").json == nil)
    }

    @Test func theGuardRefusesAnyOtherShape() {
        func refused(_ text: String) -> Bool {
            do {
                try SubscriptionPushBody.check(Array(text.utf8))
                return false
            } catch { return true }
        }
        #expect(!refused(#"{"@type":"StateChange","changed":{"1":{"Email":"s-1"}}}"#))
        #expect(!refused(#"{"@type":"PushVerification","pushSubscriptionId":"a","verificationCode":"b"}"#))
        #expect(refused(#"{"@type":"StateChange","changed":{"1":{"Email":"s-1"}},"subject":"Hi"}"#))
        #expect(refused(#"{"@type":"StateChange","changed":{"1":{"Email":"Hello there"}}}"#))
        #expect(refused(#"{"@type":"StateChange","changed":{"1":{"Email":3}}}"#))
        #expect(refused(#"{"@type":"StateChange","changed":{}}"#))
        #expect(refused(#"{"@type":"Email","id":"1"}"#))
        #expect(refused(#"{"@type":"PushVerification","pushSubscriptionId":"a"}"#))
        #expect(refused("[1]"))
        let long = String(repeating: "a", count: 60)
        let many = (0..<8).map { "\"T\($0)\(long)\":\"\(long)\"" }.joined(separator: ",")
        #expect(refused(#"{"@type":"StateChange","changed":{"1":{"# + many + "}}}"))
    }
}
