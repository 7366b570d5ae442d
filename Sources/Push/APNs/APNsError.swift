import Foundation

/// A refusal from APNs: the HTTP status, the documented reason, and the headers that came with it.
public struct APNsError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Every reason Apple documents for the provider API, plus `unknown` for anything else.
    public enum Reason: Sendable, Hashable, CustomStringConvertible {
        /// 400: the collapse id is too long.
        case badCollapseId
        /// 400: the device token is invalid (not a token, or for the other environment).
        case badDeviceToken
        /// 400: the `apns-expiration` value is bad.
        case badExpirationDate
        /// 400: the `apns-id` value is bad.
        case badMessageId
        /// 400: the `apns-priority` value is bad.
        case badPriority
        /// 400: the `apns-topic` is invalid.
        case badTopic
        /// 400: the device token does not match the topic.
        case deviceTokenNotForTopic
        /// 400: a header was repeated.
        case duplicateHeaders
        /// 400: the connection sat idle too long.
        case idleTimeout
        /// 400: `apns-push-type` is invalid.
        case invalidPushType
        /// 400: no device token in the path.
        case missingDeviceToken
        /// 400: no `apns-topic` where one is needed.
        case missingTopic
        /// 400: the body is empty.
        case payloadEmpty
        /// 400: pushing to this topic is not allowed.
        case topicDisallowed
        /// 403: the client certificate is invalid.
        case badCertificate
        /// 403: the client certificate is for the other environment.
        case badCertificateEnvironment
        /// 403: the provider token is stale.
        case expiredProviderToken
        /// 403: the action is not allowed.
        case forbidden
        /// 403: the provider token is not valid, or its signature does not verify.
        case invalidProviderToken
        /// 403: no certificate and no provider token.
        case missingProviderToken
        /// 403: the key id in the token is not related to this connection's team.
        case unrelatedKeyIdInToken
        /// 403: the key id in the token belongs to the other environment.
        case badEnvironmentKeyIdInToken
        /// 404: the request path is wrong.
        case badPath
        /// 405: only POST is supported.
        case methodNotAllowed
        /// 410: the device token has expired.
        case expiredToken
        /// 410: the device token is no longer active for the topic.
        case unregistered
        /// 413: the payload is too large.
        case payloadTooLarge
        /// 429: the provider token is being updated too often.
        case tooManyProviderTokenUpdates
        /// 429: too many requests to the same device token.
        case tooManyRequests
        /// 500: an internal server error.
        case internalServerError
        /// 503: the service is unavailable.
        case serviceUnavailable
        /// 503: the server is shutting down.
        case shutdown
        /// A reason this library does not know (kept, shortened to 64 printable ASCII characters).
        case unknown(String)

        private static let known: [String: Reason] = [
            "BadCollapseId": .badCollapseId, "BadDeviceToken": .badDeviceToken,
            "BadExpirationDate": .badExpirationDate, "BadMessageId": .badMessageId, "BadPriority": .badPriority,
            "BadTopic": .badTopic, "DeviceTokenNotForTopic": .deviceTokenNotForTopic,
            "DuplicateHeaders": .duplicateHeaders, "IdleTimeout": .idleTimeout, "InvalidPushType": .invalidPushType,
            "MissingDeviceToken": .missingDeviceToken, "MissingTopic": .missingTopic, "PayloadEmpty": .payloadEmpty,
            "TopicDisallowed": .topicDisallowed, "BadCertificate": .badCertificate,
            "BadCertificateEnvironment": .badCertificateEnvironment, "ExpiredProviderToken": .expiredProviderToken,
            "Forbidden": .forbidden, "InvalidProviderToken": .invalidProviderToken,
            "MissingProviderToken": .missingProviderToken, "UnrelatedKeyIdInToken": .unrelatedKeyIdInToken,
            "BadEnvironmentKeyIdInToken": .badEnvironmentKeyIdInToken, "BadPath": .badPath,
            "MethodNotAllowed": .methodNotAllowed, "ExpiredToken": .expiredToken, "Unregistered": .unregistered,
            "PayloadTooLarge": .payloadTooLarge, "TooManyProviderTokenUpdates": .tooManyProviderTokenUpdates,
            "TooManyRequests": .tooManyRequests, "InternalServerError": .internalServerError,
            "ServiceUnavailable": .serviceUnavailable, "Shutdown": .shutdown,
        ]

        /// Every documented reason string, in Apple's table order.
        public static let documentedReasons: [String] = [
            "BadCollapseId", "BadDeviceToken", "BadExpirationDate", "BadMessageId", "BadPriority", "BadTopic",
            "DeviceTokenNotForTopic", "DuplicateHeaders", "IdleTimeout", "InvalidPushType", "MissingDeviceToken",
            "MissingTopic", "PayloadEmpty", "TopicDisallowed", "BadCertificate", "BadCertificateEnvironment",
            "ExpiredProviderToken", "Forbidden", "InvalidProviderToken", "MissingProviderToken",
            "UnrelatedKeyIdInToken", "BadEnvironmentKeyIdInToken", "BadPath", "MethodNotAllowed", "ExpiredToken",
            "Unregistered", "PayloadTooLarge", "TooManyProviderTokenUpdates", "TooManyRequests",
            "InternalServerError", "ServiceUnavailable", "Shutdown",
        ]

        /// The reason for a `reason` string from a response body; unknown strings become ``unknown(_:)``.
        public init(_ string: String) {
            if let reason = Self.known[string] {
                self = reason
            } else {
                let printable = string.unicodeScalars.filter { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F }
                self = .unknown(String(String.UnicodeScalarView(printable.prefix(64))))
            }
        }

        /// The reason string as APNs writes it, e.g. `"BadDeviceToken"`.
        public var rawValue: String {
            if case .unknown(let text) = self { return text }
            return Self.known.first { $0.value == self }!.key
        }

        /// The reason string.
        public var description: String { rawValue }
    }

    /// The HTTP status, e.g. 400 or 410.
    public var status: Int
    /// Why APNs refused the request.
    public var reason: Reason
    /// The `apns-id` header of the response, if present.
    public var apnsID: String?
    /// For 410: when APNs learned the token was no longer valid (the body's `timestamp`, milliseconds).
    public var timestamp: Date?
    /// The `Retry-After` header, if present.
    public var retryAfter: Duration?

    /// Creates an error value.
    public init(
        status: Int, reason: Reason, apnsID: String? = nil, timestamp: Date? = nil, retryAfter: Duration? = nil
    ) {
        self.status = status
        self.reason = reason
        self.apnsID = apnsID
        self.timestamp = timestamp
        self.retryAfter = retryAfter
    }

    /// Parses an error response: the body `{"reason": …, "timestamp": ms}`, the `apns-id` and `Retry-After`
    /// headers. A missing or unreadable body gives an ``Reason/unknown(_:)`` reason.
    public init(status: Int, body: some Collection<UInt8>, apnsID: String?, retryAfter: String?, now: Date) {
        var reason = Reason.unknown("")
        var timestamp: Date?
        if let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] {
            if let text = object["reason"] as? String { reason = Reason(text) }
            if let number = object["timestamp"] as? NSNumber, !(object["timestamp"] is String) {
                timestamp = Date(timeIntervalSince1970: number.doubleValue / 1000)
            }
        }
        self.init(
            status: status, reason: reason, apnsID: apnsID, timestamp: timestamp,
            retryAfter: retryAfter.flatMap { Self.parseRetryAfter($0, now: now) })
    }

    /// Parses a `Retry-After` value: delay seconds, or an HTTP date (RFC 9110).
    public static func parseRetryAfter(_ value: String, now: Date) -> Duration? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Int64(trimmed), seconds >= 0 { return .seconds(seconds) }
        guard let date = parseHTTPDate(trimmed) else { return nil }
        return .milliseconds(max(0, Int64(date.timeIntervalSince(now) * 1000)))
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110 section 5.6.7), read byte by byte.
    ///
    /// Not `DateFormatter`: this toolchain's traps on some non-ASCII input ("Incorrect range"), which the fuzzer
    /// found in a `Retry-After` header, so a gateway's header could stop the process.
    static func parseHTTPDate(_ text: String) -> Date? {
        let b = Array(text.utf8)
        guard b.count == 29, b[3] == UInt8(ascii: ","), b[4] == 0x20, b[7] == 0x20, b[11] == 0x20, b[16] == 0x20,
            b[19] == UInt8(ascii: ":"), b[22] == UInt8(ascii: ":"), Array(b[25...]) == Array(" GMT".utf8)
        else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in b[range] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }
        let monthName = String(decoding: b[8..<11], as: UTF8.self)
        guard let day = number(5..<7), let year = number(12..<16), let hour = number(17..<19),
            let minute = number(20..<22), let second = number(23..<25),
            let month = months.firstIndex(of: monthName), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var components = DateComponents()
        components.timeZone = TimeZone(identifier: "GMT")
        (components.year, components.month, components.day) = (year, month + 1, day)
        (components.hour, components.minute, components.second) = (hour, minute, second)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "GMT")!
        guard let date = calendar.date(from: components),
            calendar.component(.day, from: date) == day  // no 31 Feb rolled into March
        else { return nil }
        return date
    }

    /// The status and reason, e.g. `"APNs 410 Unregistered"`.
    public var description: String { "APNs \(status) \(reason.rawValue)" }
}
