import Foundation
import Testing

@testable import APNs

@Suite("Payload guard: only content-free payloads reach the wire")
struct PayloadGuardTests {
    let standard = PayloadGuard()
    let legacy = PayloadGuard(limit: .legacy)

    private func violation(_ json: String, guard payloadGuard: PayloadGuard = PayloadGuard()) -> PayloadGuardViolation?
    {
        do {
            try payloadGuard.inspect(Array(json.utf8))
            return nil
        } catch {
            return error
        }
    }

    @Test(arguments: [
        #"{"aps":{"content-available":1}}"#,
        #"{"aps":{"badge":0}}"#,
        #"{"aps":{"badge":9223372036854775807,"content-available":1},"acct":"a-_Z9","st":"q1w2e3r4t5y6u7i8"}"#,
        #"{ "st" : "Z9_-x8Y7w6V5u4T3", "aps" : { "content-available" : 1 } }"#,
    ])
    func allowsContentFreePayloads(_ json: String) {
        #expect(violation(json) == nil)
    }

    @Test func allowsEverySignalItBuilds() throws {
        for badge in [nil, 0, 1, 99_999] {
            for contentAvailable in [true, false] where badge != nil || contentAvailable {
                let signal = try ContentFreeSignal(
                    badge: badge, contentAvailable: contentAvailable, alias: "dev_1-A", tag: "q1w2e3r4t5y6u7i8")
                #expect(standard.allows(signal.payload))
                #expect(legacy.allows(signal.payload))
            }
        }
    }

    @Test(arguments: ["alert", "subject", "body", "from", "sender", "data", "message", "mdm", "", "APS", "acct "])
    func rejectsTopLevelKeys(_ key: String) {
        let json = #"{"aps":{"content-available":1},"\#(key)":"x"}"#
        #expect(violation(json) == PayloadGuardViolation(.unexpectedKey, at: "$"))
    }

    @Test(arguments: [
        "alert", "sound", "category", "thread-id", "mutable-content", "interruption-level", "relevance-score",
        "target-content-id", "filter-criteria", "content-state", "timestamp", "event", "Badge",
    ])
    func rejectsApsKeys(_ key: String) {
        let json = #"{"aps":{"content-available":1,"\#(key)":"x"}}"#
        #expect(violation(json) == PayloadGuardViolation(.unexpectedKey, at: "$.aps"))
    }

    @Test func rejectsNestedValues() {
        #expect(
            violation(#"{"aps":{"badge":{"subject":"x"}}}"#) == PayloadGuardViolation(.wrongType, at: "$.aps.badge"))
        #expect(
            violation(#"{"aps":{"content-available":[1]}}"#)
                == PayloadGuardViolation(.wrongType, at: "$.aps.content-available"))
        #expect(
            violation(#"{"aps":{"content-available":1},"acct":{"body":"x"}}"#)
                == PayloadGuardViolation(.wrongType, at: "$.acct"))
        #expect(
            violation(#"{"aps":{"content-available":1},"st":["x"]}"#) == PayloadGuardViolation(.wrongType, at: "$.st"))
        #expect(violation(#"{"aps":[{"content-available":1}]}"#) == PayloadGuardViolation(.wrongType, at: "$.aps"))
        #expect(violation(#"{"aps":"x"}"#) == PayloadGuardViolation(.wrongType, at: "$.aps"))
    }

    @Test(arguments: [
        (#"{"aps":{"badge":"3"}}"#, PayloadGuardViolation(.wrongType, at: "$.aps.badge")),
        (#"{"aps":{"badge":true}}"#, PayloadGuardViolation(.wrongType, at: "$.aps.badge")),
        (#"{"aps":{"badge":null}}"#, PayloadGuardViolation(.wrongType, at: "$.aps.badge")),
        (#"{"aps":{"badge":-1}}"#, PayloadGuardViolation(.invalidValue, at: "$.aps.badge")),
        (#"{"aps":{"badge":3.0}}"#, PayloadGuardViolation(.invalidValue, at: "$.aps.badge")),
        (#"{"aps":{"badge":1e2}}"#, PayloadGuardViolation(.invalidValue, at: "$.aps.badge")),
        (#"{"aps":{"badge":99999999999999999999}}"#, PayloadGuardViolation(.invalidValue, at: "$.aps.badge")),
        (#"{"aps":{"content-available":0}}"#, PayloadGuardViolation(.invalidValue, at: "$.aps.content-available")),
        (#"{"aps":{"content-available":2}}"#, PayloadGuardViolation(.invalidValue, at: "$.aps.content-available")),
        (#"{"aps":{"content-available":1.0}}"#, PayloadGuardViolation(.invalidValue, at: "$.aps.content-available")),
        (#"{"aps":{"content-available":true}}"#, PayloadGuardViolation(.wrongType, at: "$.aps.content-available")),
        (#"{"aps":{"content-available":"1"}}"#, PayloadGuardViolation(.wrongType, at: "$.aps.content-available")),
        (#"{"aps":{"content-available":1},"acct":5}"#, PayloadGuardViolation(.wrongType, at: "$.acct")),
        (#"{"aps":{"content-available":1},"acct":"a b"}"#, PayloadGuardViolation(.invalidValue, at: "$.acct")),
        (#"{"aps":{"content-available":1},"acct":""}"#, PayloadGuardViolation(.invalidValue, at: "$.acct")),
        (#"{"aps":{"content-available":1},"st":"ABC"}"#, PayloadGuardViolation(.invalidValue, at: "$.st")),
        (#"{"aps":{"content-available":1},"st":null}"#, PayloadGuardViolation(.wrongType, at: "$.st")),
    ])
    func rejectsWrongTypesAndValues(_ json: String, _ expected: PayloadGuardViolation) {
        #expect(violation(json) == expected)
    }

    @Test func rejectsLongAliasAndState() {
        let long = String(repeating: "a", count: 65)
        #expect(
            violation(#"{"aps":{"badge":1},"acct":"\#(long)"}"#) == PayloadGuardViolation(.invalidValue, at: "$.acct"))
        #expect(violation(#"{"aps":{"badge":1},"st":"\#(long)"}"#) == PayloadGuardViolation(.invalidValue, at: "$.st"))
        // A state string is not a tag: the guard refuses the old form, which counted changes.
        #expect(
            violation(#"{"aps":{"badge":1},"st":"00000000000000a1-42"}"#)
                == PayloadGuardViolation(.invalidValue, at: "$.st"))
    }

    @Test(arguments: [
        "", " ", "{", "}", "{}x", #"{"aps":{"badge":1}}{}"#, "nul", "\u{FEFF}{}", #"{"aps":{"badge":01}}"#,
        #"{'aps':{}}"#, #"{"aps":{"badge":1},}"#,
    ])
    func rejectsInvalidJSON(_ text: String) {
        #expect(violation(text) == PayloadGuardViolation(.notJSON))
    }

    @Test(arguments: ["[]", #"[{"aps":{"badge":1}}]"#, #""aps""#, "1", "null", "true"])
    func rejectsNonObjects(_ text: String) {
        #expect(violation(text) == PayloadGuardViolation(.notAnObject))
    }

    @Test func rejectsMissingOrEmptyAps() {
        #expect(violation("{}") == PayloadGuardViolation(.missingAps))
        #expect(violation(#"{"acct":"abc","st":"q1w2e3r4t5y6u7i8"}"#) == PayloadGuardViolation(.missingAps))
        #expect(violation(#"{"aps":{}}"#) == PayloadGuardViolation(.emptyAps, at: "$.aps"))
    }

    @Test func rejectsDuplicateKeys() {
        #expect(
            violation(#"{"aps":{"badge":1},"aps":{"alert":"x"}}"#) == PayloadGuardViolation(.duplicateKey, at: "$"))
        #expect(
            violation(#"{"aps":{"badge":1,"badge":2}}"#) == PayloadGuardViolation(.duplicateKey, at: "$.aps"))
        #expect(
            violation(#"{"aps":{"badge":1},"st":"1","st":"2"}"#) == PayloadGuardViolation(.duplicateKey, at: "$"))
    }

    /// A valid payload padded with whitespace to exactly `size` bytes.
    private func padded(_ size: Int) -> [UInt8] {
        let core = #"{"aps":{"content-available":1},"st":"q1w2e3r4t5y6u7i8"}"#
        return Array((core.dropLast() + String(repeating: " ", count: size - core.utf8.count) + "}").utf8)
    }

    @Test func enforcesSizeLimitsAtTheBoundary() throws {
        #expect(padded(4096).count == 4096)
        #expect(standard.allows(padded(4096)))
        #expect(throws: PayloadGuardViolation(.tooLarge(size: 4097, limit: 4096))) {
            try standard.inspect(padded(4097))
        }
        #expect(legacy.allows(padded(2048)))
        #expect(throws: PayloadGuardViolation(.tooLarge(size: 2049, limit: 2048))) {
            try legacy.inspect(padded(2049))
        }
        #expect(standard.allows(padded(2049)))
    }

    @Test func violationsNeverNameUnexpectedKeysOrValues() {
        let json = #"{"aps":{"content-available":1},"Quarterly results":"confidential body"}"#
        let description = violation(json).map { "\($0)" } ?? ""
        #expect(!description.contains("Quarterly"))
        #expect(!description.contains("confidential"))
    }
}
