import Foundation
import HTTP2Client
import Push
import Testing

@testable import PushFCM

/// Each FCM HTTP v1 answer, in Google's shape, and what the dispatcher does with it.
@Suite("FCM answers")
struct FCMAnswerTests {
    static func response(
        _ status: Int, _ errorStatus: String? = nil, _ errorCode: String? = nil, message: String = "",
        retryAfter: String? = nil
    ) -> HTTP2Client.Response {
        var body = Data()
        if let errorStatus {
            var error: [String: Any] = ["code": status, "message": message, "status": errorStatus]
            if let errorCode {
                error["details"] = [
                    ["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": errorCode]
                ]
            }
            body = try! JSONSerialization.data(withJSONObject: ["error": error])
        } else if status == 200 {
            body = Data(#"{"name":"projects/p/messages/1"}"#.utf8)
        }
        var headers: [HTTPField] = []
        if let retryAfter { headers.append(.init("retry-after", retryAfter)) }
        return HTTP2Client.Response(status: status, headers: headers, body: Array(body))
    }

    static func outcome(_ response: HTTP2Client.Response) -> PushOutcome { FCMAnswer(response).outcome }

    @Test func successIsDelivered() {
        #expect(Self.outcome(Self.response(200)) == .delivered)
    }

    @Test func anUninstalledAppsTokenIsRemoved() {
        #expect(
            Self.outcome(Self.response(404, "NOT_FOUND", "UNREGISTERED"))
                == .dropRegistration(reason: "UNREGISTERED", unregisteredAt: nil))
    }

    @Test func aTokenThatIsNotOneIsRemovedButAnotherInvalidArgumentIsADefect() {
        let badToken = Self.response(
            400, "INVALID_ARGUMENT", "INVALID_ARGUMENT",
            message: "The registration token is not a valid FCM registration token")
        #expect(Self.outcome(badToken) == .dropRegistration(reason: "invalidRegistrationToken", unregisteredAt: nil))
        let badMessage = Self.response(
            400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", message: "Invalid value at 'message.android.ttl'")
        #expect(Self.outcome(badMessage) == .defect(reason: "INVALID_ARGUMENT"))
    }

    @Test func aTokenOfAnotherSenderIsRemoved() {
        #expect(
            Self.outcome(Self.response(403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH"))
                == .dropRegistration(reason: "SENDER_ID_MISMATCH", unregisteredAt: nil))
    }

    @Test func quotaIsRetriedAfterRetryAfterOrAMinute() {
        #expect(
            Self.outcome(Self.response(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", retryAfter: "7"))
                == .retry(reason: "QUOTA_EXCEEDED", retryAfter: 7))
        #expect(
            Self.outcome(Self.response(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"))
                == .retry(reason: "QUOTA_EXCEEDED", retryAfter: 60))
    }

    @Test func unavailableAndInternalAreRetriedHonouringRetryAfter() {
        #expect(
            Self.outcome(Self.response(503, "UNAVAILABLE", "UNAVAILABLE", retryAfter: "3"))
                == .retry(reason: "UNAVAILABLE", retryAfter: 3))
        #expect(
            Self.outcome(Self.response(500, "INTERNAL", "INTERNAL")) == .retry(reason: "INTERNAL", retryAfter: nil))
        #expect(Self.outcome(Self.response(502)) == .retry(reason: "HTTP 502", retryAfter: nil))
    }

    @Test func anExpiredAccessTokenIsRefreshedButAThirdPartyAuthErrorIsADefect() {
        let expired = FCMAnswer(Self.response(401, "UNAUTHENTICATED"))
        #expect(expired.isExpiredCredential)
        let thirdParty = FCMAnswer(Self.response(401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR"))
        #expect(!thirdParty.isExpiredCredential)
        #expect(thirdParty.outcome == .defect(reason: "THIRD_PARTY_AUTH_ERROR"))
    }

    @Test func aNotFoundWithoutUnregisteredIsADefectNotAGoneDevice() {
        // A wrong endpoint or a proxy answers 404 for every token: that must not delete every device.
        #expect(Self.outcome(Self.response(404)) == .defect(reason: "HTTP 404"))
        #expect(Self.outcome(Self.response(404, "NOT_FOUND")) == .defect(reason: "NOT_FOUND"))
    }

    @Test func otherClientErrorsAreDefects() {
        #expect(Self.outcome(Self.response(403, "PERMISSION_DENIED")) == .defect(reason: "PERMISSION_DENIED"))
        #expect(Self.outcome(Self.response(413)) == .defect(reason: "HTTP 413"))
    }
}
