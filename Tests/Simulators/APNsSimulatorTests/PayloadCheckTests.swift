import Foundation
import Testing

@testable import APNsSimulator

/// The byte-level payload scan against `JSONSerialization`, the reference it must agree with.
@Suite("Payload check")
struct PayloadCheckTests {
    /// Payloads the scan should decide by itself (plain JSON objects).
    static let plainObjects = [
        #"{}"#, #"{"aps":{}}"#, #"{"aps":{"badge":1}}"#, #"{"aps":{"content-available":1}}"#,
        #"{"aps":{"content-available":1},"acct":"a1b2","st":"1700000000-42"}"#,
        #"{"aps":{"content-available":0}}"#, #"{"aps":{"content-available":2}}"#,
        #"{"aps":{"content-available":-1}}"#, #"{"aps":{"content-available":10}}"#,
        #"{"aps":{"content-available":-0}}"#, #"{"aps":{"content-available":123456789012345}}"#,
        #"{"aps":{"badge":1,"content-available":1,"sound":"default"}}"#,
        #" { "aps" : { "content-available" : 1 } } "#, "{\n\t\"aps\": {\"content-available\": 1}\r\n}\n",
        #"{"aps":[1,2,3]}"#, #"{"aps":"text"}"#, #"{"aps":null}"#, #"{"aps":1}"#, #"{"APS":{"content-available":1}}"#,
        #"{"x":{"aps":{"content-available":1}}}"#, #"{"aps":{"x":{"content-available":1}}}"#,
        #"{"a":[],"b":{},"c":[{}],"d":[[[]]],"e":true,"f":false,"g":null,"h":0,"i":-5}"#,
        #"{"":""}"#, #"{"a":"", "b":" "}"#, #"{"k":"~!@#$%^&*()_+`-={}|[]:;'<>?,./"}"#,
        #"{"a":1,"A":2}"#, #"{"a":{"a":{"a":1}}}"#, #"{"aps":{"alert":{"title":"t","body":"b"},"badge":3}}"#,
    ]

    /// Payloads the scan leaves to `JSONSerialization`, valid or not.
    static let otherPayloads = [
        "", " ", "null", "1", "\"text\"", "[]", "[{}]", "true", "{", "}", "{\"a\"}", "{\"a\":}", "{\"a\":1,}",
        "{,}", "{\"a\":1 \"b\":2}", "{\"a\" 1}", "{a:1}", "{'a':1}", "{\"a\":01}", "{\"a\":1.0}", "{\"a\":1e3}",
        "{\"a\":-}", "{\"a\":+1}", "{\"a\":.5}", "{\"a\":1.}", "{\"a\":NaN}", "{\"a\":Infinity}", "{\"a\":tru}",
        "{\"a\":nul}", "{\"a\":True}", "{} {}", "{}x", "{}\u{0}", "\u{FEFF}{}", "{\"a\":\"\\n\"}",
        "{\"a\":\"\\u0041\"}", "{\"a\":\"\\\"\"}", "{\"a\":\"\\x\"}", "{\"a\":\"tab\there\"}", "{\"a\":\"é\"}",
        "{\"é\":1}", "{\"a\":\"\u{7F}\"}", "{\"a\":1,\"a\":2}", "{\"aps\":{\"content-available\":1},\"aps\":{}}",
        "{\"aps\":{\"content-available\":1,\"content-available\":0}}",
        "{\"aps\":{\"content-available\":true}}", "{\"aps\":{\"content-available\":false}}",
        "{\"aps\":{\"content-available\":\"1\"}}", "{\"aps\":{\"content-available\":1.0}}",
        "{\"aps\":{\"content-available\":1.5}}", "{\"aps\":{\"content-available\":1e0}}",
        "{\"aps\":{\"content-available\":null}}", "{\"aps\":{\"content-available\":[1]}}",
        "{\"aps\":{\"content-available\":1234567890123456}}", "{\"aps\":{\"content-available\":99999999999999999999}}",
        "{\"a\":[1,]}", "{\"a\":[,1]}", "{\"a\":[1 2]}", "{\"a\":\"unterminated}", "{\"a\":1}}", "{\"a\":[}",
        "\u{0B}{}", "{\u{0C}}", String(repeating: "{\"a\":", count: 40) + "1" + String(repeating: "}", count: 40),
        String(repeating: "{\"a\":", count: 600) + "1" + String(repeating: "}", count: 600),
    ]

    @Test func scanDecidesPlainObjectsAsJSONSerializationDoes() {
        for text in Self.plainObjects {
            let body = Data(text.utf8)
            let scanned = PayloadCheck.scan(body)
            #expect(scanned != nil, "the scan should decide \(text.debugDescription)")
            #expect(scanned == PayloadCheck.foundationCheck(body), "\(text.debugDescription)")
            #expect(PayloadCheck.check(body, needsContentAvailable: true) == PayloadCheck.foundationCheck(body))
        }
    }

    @Test func everyPayloadGetsTheReferenceVerdict() {
        for text in Self.plainObjects + Self.otherPayloads {
            let body = Data(text.utf8)
            let reference = PayloadCheck.foundationCheck(body)
            if let scanned = PayloadCheck.scan(body), scanned != .object(contentAvailableIsOne: nil) {
                #expect(scanned == reference, "scan disagrees on \(text.debugDescription)")
            }
            #expect(PayloadCheck.check(body, needsContentAvailable: true) == reference, "\(text.debugDescription)")
            let objectOnly = PayloadCheck.check(body, needsContentAvailable: false)
            switch (objectOnly, reference) {
            case (.notAnObject, .notAnObject), (.object, .object): break
            default: Issue.record("object verdict differs on \(text.debugDescription)")
            }
        }
    }

    @Test func invalidUTF8AndControlBytesAreLeftToJSONSerialization() {
        let bodies: [[UInt8]] = [
            [0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xFF, 0x22, 0x7D],
            [0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0x01, 0x22, 0x7D],
            [0x7B, 0x7D, 0x00], [0xEF, 0xBB, 0xBF, 0x7B, 0x7D], [0xFE, 0xFF, 0x00, 0x7B, 0x00, 0x7D],
            [0x7B, 0x00, 0x7D, 0x00],
        ]
        for bytes in bodies {
            let body = Data(bytes)
            #expect(PayloadCheck.scan(body) == nil, "\(bytes)")
            #expect(PayloadCheck.check(body, needsContentAvailable: true) == PayloadCheck.foundationCheck(body))
        }
    }

    @Test func generatedObjectsAgree() {
        // Small random documents over the scan's grammar, plus random single-byte damage to them.
        var generator = SystemRandomNumberGenerator()
        let atoms = [
            "1", "0", "-3", "true", "false", "null", "\"s\"", "\"\"", "[]", "{}", "[1,\"x\"]", "1.5", "\"\\n\"",
        ]
        let keys = ["aps", "content-available", "a", "badge", "aps"]
        for _ in 0..<400 {
            var members: [String] = []
            for _ in 0..<Int.random(in: 0...4, using: &generator) {
                let key = keys.randomElement(using: &generator)!
                let value: String
                if Bool.random(using: &generator) {
                    let inner = (0..<Int.random(in: 0...2, using: &generator)).map { _ in
                        "\"\(keys.randomElement(using: &generator)!)\":\(atoms.randomElement(using: &generator)!)"
                    }
                    value = "{" + inner.joined(separator: ",") + "}"
                } else {
                    value = atoms.randomElement(using: &generator)!
                }
                members.append("\"\(key)\":\(value)")
            }
            var bytes = Array(("{" + members.joined(separator: ",") + "}").utf8)
            for damaged in [false, true] {
                if damaged {
                    let index = Int.random(in: 0..<bytes.count, using: &generator)
                    bytes[index] = Array("{}[]\",:0a- \\".utf8).randomElement(using: &generator)!
                }
                let body = Data(bytes)
                let reference = PayloadCheck.foundationCheck(body)
                #expect(
                    PayloadCheck.check(body, needsContentAvailable: true) == reference,
                    "\(String(decoding: bytes, as: UTF8.self).debugDescription)")
            }
        }
    }
}
