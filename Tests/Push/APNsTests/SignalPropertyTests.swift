import Foundation
import OpenSSLCrypto
import Push
import Testing

@testable import APNs

@Suite("Property: message content never reaches the wire")
struct SignalPropertyTests {
    /// Subject-, sender- and body-like strings, including ones shaped like JSON or headers.
    static let fixed = [
        "Quarterly results", "alice@example.com", "Re: your invoice #4471", "Hi Bob, see attached.",
        #"{"aps":{"alert":"You have mail"}}"#, #"","alert":"injected"#, #"\"},\"subject\":\"x"#,
        "Subject: hello\r\nX-Injected: 1", "Grüße aus Köln", "会议 纪要", "🙂 party at 8", "<b>bold</b>",
        #"{"acct":"attacker"}"#, "null body", "   ", "a b", "-- -- --", "'; DROP TABLE messages; --",
    ]

    /// A random content-like string: printable characters with at least one space or punctuation mark, so it
    /// can never pass as an opaque token.
    static func randomContent(using random: inout SeededGenerator) -> String {
        let alphabet = Array(
            #"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,:;!?@#"'{}[]<>\/éü中🙂-_"#)
        let length = Int.random(in: 6...40, using: &random)
        var characters = (0..<length).map { _ in alphabet.randomElement(using: &random)! }
        let separators: [Character] = [" ", "\"", "{", ":", "@", ",", "."]
        characters.insert(separators.randomElement(using: &random)!, at: Int.random(in: 0...length, using: &random))
        return String(characters)
    }

    static func randomState(using random: inout SeededGenerator) -> String {
        let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_-")
        return String((0..<StateTag.length).map { _ in alphabet.randomElement(using: &random)! })
    }

    @Test func wireBytesHoldNoContent() throws {
        var random = SeededGenerator(seed: 0x5EED)
        let payloadGuard = PayloadGuard()
        for iteration in 0..<500 {
            let held = [
                Self.fixed.randomElement(using: &random)!, Self.randomContent(using: &random),
                Self.randomContent(using: &random), Self.randomContent(using: &random),
            ]
            // The rest of the system holds these strings; the signal is built only from valid opaque values.
            let badge: Int? = Bool.random(using: &random) ? Int.random(in: 0...100_000, using: &random) : nil
            let contentAvailable = badge == nil || Bool.random(using: &random)
            let alias =
                Bool.random(using: &random) ? try DeviceAlias(SecureRandom.base64URL(Int.random(in: 1...48))) : nil
            let tag = Bool.random(using: &random) ? try StateTag(Self.randomState(using: &random)) : nil
            let signal = try ContentFreeSignal(
                badge: badge, contentAvailable: contentAvailable, alias: alias, tag: tag)
            let notification = try APNsNotification(
                deviceToken: testDeviceToken(iteration), signal: signal, topic: testTopic,
                collapseID: Bool.random(using: &random) ? try CollapseID("acct-\(iteration)") : nil)

            var wire = String(decoding: signal.payload, as: UTF8.self)
            for field in notification.headers(now: Date()) { wire += "\n\(field.name): \(field.value)" }
            #expect(payloadGuard.allows(signal.payload))
            for text in held {
                #expect(!wire.contains(text), "wire bytes contain held content")
                #expect(throws: SignalFieldError.invalidAlias) { try DeviceAlias(text) }
                #expect(throws: SignalFieldError.invalidStateTag) { try StateTag(text) }
                #expect(throws: APNsValidationError.self) { try ContentFreeSignal(badge: 1, alias: text, tag: nil) }
                #expect(throws: APNsValidationError.self) { try ContentFreeSignal(alias: nil, tag: text) }
                #expect(throws: APNsValidationError.invalidCollapseID) { try CollapseID(text) }
            }
        }
    }

    @Test func guardRefusesContentSmuggledIntoAValidPayload() throws {
        var random = SeededGenerator(seed: 42)
        let payloadGuard = PayloadGuard()
        for _ in 0..<300 {
            let text = Self.randomContent(using: &random)
            let escaped = String(decoding: try JSONSerialization.data(withJSONObject: [text]), as: UTF8.self)
                .dropFirst().dropLast()
            let base = #"{"aps":{"content-available":1}"#
            for smuggled in [
                base + #","subject":\#(escaped)}"#,
                #"{"aps":{"content-available":1,"alert":\#(escaped)}}"#,
                base + #","acct":\#(escaped)}"#,
                base + #","st":\#(escaped)}"#,
            ] {
                #expect(!payloadGuard.allows(Array(smuggled.utf8)))
            }
        }
    }
}
