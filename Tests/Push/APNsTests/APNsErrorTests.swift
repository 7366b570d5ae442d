import Foundation
import Testing

@testable import APNs

@Suite("APNs error parsing")
struct APNsErrorTests {
    let now = Date(timeIntervalSince1970: 1_700_000_000)

    @Test(arguments: APNsError.Reason.documentedReasons)
    func everyDocumentedReasonIsKnown(_ text: String) {
        let reason = APNsError.Reason(text)
        if case .unknown = reason { Issue.record("\(text) parsed as unknown") }
        #expect(reason.rawValue == text)
    }

    @Test func parsesBodyAndHeaders() {
        let error = APNsError(
            status: 410, body: Array(#"{"reason":"Unregistered","timestamp":1700000000123}"#.utf8), apnsID: "id-1",
            retryAfter: nil, now: now)
        #expect(error.status == 410)
        #expect(error.reason == .unregistered)
        #expect(error.apnsID == "id-1")
        #expect(error.timestamp == Date(timeIntervalSince1970: 1_700_000_000.123))
        #expect("\(error)" == "APNs 410 Unregistered")
    }

    @Test func keepsUnknownReasonsSanitized() {
        let error = APNsError(
            status: 400, body: Array(#"{"reason":"BrandNew\nReason"}"#.utf8), apnsID: nil, retryAfter: nil, now: now)
        #expect(error.reason == .unknown("BrandNewReason"))
        let long = APNsError.Reason(String(repeating: "x", count: 200))
        #expect(long.rawValue.count == 64)
        let empty = APNsError(status: 500, body: Array("not json".utf8), apnsID: nil, retryAfter: nil, now: now)
        #expect(empty.reason == .unknown(""))
    }

    @Test func parsesRetryAfter() {
        #expect(APNsError.parseRetryAfter("120", now: now) == .seconds(120))
        #expect(APNsError.parseRetryAfter(" 0 ", now: now) == .zero)
        #expect(APNsError.parseRetryAfter("Tue, 14 Nov 2023 22:15:20 GMT", now: now) == .seconds(120))
        #expect(APNsError.parseRetryAfter("-5", now: now) == nil)
        #expect(APNsError.parseRetryAfter("soon", now: now) == nil)
        // Found by the fuzzer: DateFormatter trapped on non-ASCII bytes in a date.
        #expect(APNsError.parseRetryAfter("W\u{6db}\u{4dc}21 Oct 2026 07:28:00 GMT", now: now) == nil)
        #expect(APNsError.parseRetryAfter("Tue, 31 Feb 2023 22:15:20 GMT", now: now) == nil)
        #expect(APNsError.parseRetryAfter("Tue, 14 Nov 2023 22:15:20 UTC", now: now) == nil)
        #expect(APNsError.parseRetryAfter("Tue, 14 Nov 2023 22:14:20 GMT", now: now) == .seconds(60))
        let error = APNsError(
            status: 429, body: Array(#"{"reason":"TooManyRequests"}"#.utf8), apnsID: nil, retryAfter: "7", now: now)
        #expect(error.retryAfter == .seconds(7))
    }

    @Test func endpoints() {
        #expect(APNsEndpoint.production.baseURL == "https://api.push.apple.com:443")
        #expect(APNsEndpoint.sandbox.baseURL == "https://api.sandbox.push.apple.com:443")
        #expect(APNsEndpoint.productionAlternatePort.baseURL == "https://api.push.apple.com:2197")
        #expect(APNsEndpoint.sandboxAlternatePort.baseURL == "https://api.sandbox.push.apple.com:2197")
        let custom = APNsEndpoint.custom(url: "https://127.0.0.1:2197/", caFile: "/tmp/ca.pem")
        #expect(custom.baseURL == "https://127.0.0.1:2197")
        #expect(custom.caFile == "/tmp/ca.pem")
        #expect(!custom.isCleartext)
        #expect(APNsEndpoint.custom(url: "http://127.0.0.1:2197").isCleartext)
    }
}
