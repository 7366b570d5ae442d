/// Why the gateway refused a provider request: Apple's reason strings, each with its HTTP status.
///
/// The raw value is the exact string APNs puts in the `{"reason": …}` body; clients match on it.
public enum RejectionReason: String, Sendable, CaseIterable, Codable {
    /// 400: the collapse identifier exceeds 64 bytes.
    case badCollapseId = "BadCollapseId"
    /// 400: the device token is malformed, was never registered, or belongs to another environment.
    case badDeviceToken = "BadDeviceToken"
    /// 400: `apns-expiration` is not a non-negative integer.
    case badExpirationDate = "BadExpirationDate"
    /// 400: `apns-id` is not a UUID.
    case badMessageId = "BadMessageId"
    /// 400: `apns-priority` is not 1, 5 or 10.
    case badPriority = "BadPriority"
    /// 400: `apns-topic` is not a valid topic.
    case badTopic = "BadTopic"
    /// 400: the device token was registered for another topic.
    case deviceTokenNotForTopic = "DeviceTokenNotForTopic"
    /// 400: one or more headers are repeated.
    case duplicateHeaders = "DuplicateHeaders"
    /// 400: `apns-push-type` is unknown, or its rules (priority, content, topic suffix) are broken.
    case invalidPushType = "InvalidPushType"
    /// 400: the `:path` holds no device token.
    case missingDeviceToken = "MissingDeviceToken"
    /// 400: `apns-topic` is missing.
    case missingTopic = "MissingTopic"
    /// 400: the body is empty.
    case payloadEmpty = "PayloadEmpty"
    /// 400: pushing to this topic is not allowed.
    case topicDisallowed = "TopicDisallowed"
    /// 400: the body is not a JSON object (Apple names no reason for this; the simulator's choice).
    case badPayload = "BadPayload"
    /// 403: the provider token is stale (issued more than an hour ago).
    case expiredProviderToken = "ExpiredProviderToken"
    /// 403: the provider token is not valid or its signature does not verify.
    case invalidProviderToken = "InvalidProviderToken"
    /// 403: no provider token (`authorization: bearer …`) was sent.
    case missingProviderToken = "MissingProviderToken"
    /// 404: the `:path` is not `/3/device/{token}`.
    case badPath = "BadPath"
    /// 405: the method is not `POST`.
    case methodNotAllowed = "MethodNotAllowed"
    /// 410: the device token is no longer active for the topic.
    case unregistered = "Unregistered"
    /// 413: the payload is too large.
    case payloadTooLarge = "PayloadTooLarge"
    /// 429: the provider token is being updated too often.
    case tooManyProviderTokenUpdates = "TooManyProviderTokenUpdates"
    /// 429: too many requests were made consecutively to the same device token.
    case tooManyRequests = "TooManyRequests"
    /// 500: an internal server error.
    case internalServerError = "InternalServerError"
    /// 503: the service is unavailable.
    case serviceUnavailable = "ServiceUnavailable"

    /// The HTTP status APNs answers with for this reason.
    public var status: Int {
        switch self {
        case .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
            .deviceTokenNotForTopic, .duplicateHeaders, .invalidPushType, .missingDeviceToken, .missingTopic,
            .payloadEmpty, .topicDisallowed, .badPayload:
            return 400
        case .expiredProviderToken, .invalidProviderToken, .missingProviderToken: return 403
        case .badPath: return 404
        case .methodNotAllowed: return 405
        case .unregistered: return 410
        case .payloadTooLarge: return 413
        case .tooManyProviderTokenUpdates, .tooManyRequests: return 429
        case .internalServerError: return 500
        case .serviceUnavailable: return 503
        }
    }
}
