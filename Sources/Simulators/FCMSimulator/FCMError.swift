import Foundation
import JSONText

/// The `errorCode` of FCM's `google.firebase.fcm.v1.FcmError` detail.
public enum FCMErrorCode: String, Sendable, Codable, CaseIterable {
    /// Bad request fields, or a registration token that is not one.
    case invalidArgument = "INVALID_ARGUMENT"
    /// The app instance was uninstalled or its token is no longer valid.
    case unregistered = "UNREGISTERED"
    /// The token belongs to another project (sender).
    case senderIDMismatch = "SENDER_ID_MISMATCH"
    /// The project's or the device's message rate was exceeded.
    case quotaExceeded = "QUOTA_EXCEEDED"
    /// FCM is overloaded; retry with backoff.
    case unavailable = "UNAVAILABLE"
    /// An unknown internal error.
    case `internal` = "INTERNAL"
    /// The APNs certificate or web-push auth key was invalid or missing.
    case thirdPartyAuthError = "THIRD_PARTY_AUTH_ERROR"

    /// The HTTP status FCM answers this code with.
    public var status: Int {
        switch self {
        case .invalidArgument: return 400
        case .unregistered: return 404
        case .senderIDMismatch: return 403
        case .quotaExceeded: return 429
        case .unavailable: return 503
        case .internal: return 500
        case .thirdPartyAuthError: return 401
        }
    }

    /// The message FCM pairs with this code.
    var defaultMessage: String {
        switch self {
        case .invalidArgument: return "Request contains an invalid argument."
        case .unregistered: return "Requested entity was not found."
        case .senderIDMismatch: return "SenderId mismatch"
        case .quotaExceeded: return "Quota exceeded for this device or project."
        case .unavailable: return "The service is currently unavailable."
        case .internal: return "Internal error encountered."
        case .thirdPartyAuthError: return "Auth error from APNS or Web Push Service"
        }
    }
}

/// One error answer of the FCM v1 API, rendered in Google's shape:
/// `{"error":{"code","message","status","details":[…]}}`.
public struct FCMAPIError: Error, Sendable, Equatable {
    /// The HTTP status (also the body's `code`).
    public var code: Int
    /// The human-readable message.
    public var message: String
    /// FCM's code in the `FcmError` detail, when the error has one.
    public var errorCode: FCMErrorCode?
    /// The `google.rpc.ErrorInfo` reason (authentication errors: `ACCESS_TOKEN_EXPIRED`, …).
    public var reason: String?
    /// The field a `google.rpc.BadRequest` detail names (validation errors).
    public var field: String?
    /// Seconds for a `Retry-After` header.
    public var retryAfter: Int?

    /// Creates an error.
    public init(
        code: Int, message: String, errorCode: FCMErrorCode? = nil, reason: String? = nil, field: String? = nil,
        retryAfter: Int? = nil
    ) {
        self.code = code
        self.message = message
        self.errorCode = errorCode
        self.reason = reason
        self.field = field
        self.retryAfter = retryAfter
    }

    /// An error with FCM's own code and its usual status and message.
    public init(_ errorCode: FCMErrorCode, message: String? = nil, retryAfter: Int? = nil) {
        self.init(
            code: errorCode.status, message: message ?? errorCode.defaultMessage, errorCode: errorCode,
            retryAfter: retryAfter)
    }

    /// A 400 `INVALID_ARGUMENT` about `field`.
    static func invalid(_ message: String, field: String? = nil) -> FCMAPIError {
        FCMAPIError(code: 400, message: message, errorCode: .invalidArgument, field: field)
    }

    /// A 401 `UNAUTHENTICATED` with Google's `ErrorInfo` reason.
    static func unauthenticated(reason: String) -> FCMAPIError {
        FCMAPIError(
            code: 401,
            message: "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or "
                + "other valid authentication credential. See "
                + "https://developers.google.com/identity/sign-in/web/devconsole-project.",
            reason: reason)
    }

    /// Google's canonical status name for the HTTP status.
    public var status: String {
        switch code {
        case 400: return "INVALID_ARGUMENT"
        case 401: return "UNAUTHENTICATED"
        case 403: return "PERMISSION_DENIED"
        case 404: return "NOT_FOUND"
        case 409: return "ABORTED"
        case 429: return "RESOURCE_EXHAUSTED"
        case 501: return "UNIMPLEMENTED"
        case 503: return "UNAVAILABLE"
        case 504: return "DEADLINE_EXCEEDED"
        default: return code >= 500 ? "INTERNAL" : "FAILED_PRECONDITION"
        }
    }

    /// The JSON body.
    public var body: Data {
        var details: [JSONValue] = []
        if let errorCode {
            details.append([
                "@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError",
                "errorCode": .string(errorCode.rawValue),
            ])
        }
        if let field {
            details.append([
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [["field": .string(field), "description": .string(message)]],
            ])
        }
        if let reason {
            details.append([
                "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": .string(reason),
                "domain": "googleapis.com",
                "metadata": [
                    "service": "fcm.googleapis.com", "method": "google.firebase.fcm.v1.FcmService.SendMessage",
                ],
            ])
        }
        let object: JSONValue = [
            "error": [
                "code": .int(Int64(code)), "message": .string(message), "status": .string(status),
                "details": .array(details),
            ]
        ]
        return Data(object.jsonBytes)
    }
}
