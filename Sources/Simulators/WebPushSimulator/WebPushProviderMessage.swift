import Foundation
import JSONText
import SimulatorSupport

/// A refused push request, rendered in autopush's shape: `{"code","errno","error","message","more_info"}`.
public struct WebPushAPIError: Error, Sendable, Equatable {
    /// The HTTP status (also the body's `code`).
    public var status: Int
    /// autopush's error number for the kind of mistake (999 where it has none).
    public var errno: Int
    /// What is wrong; never request content.
    public var message: String
    /// Seconds for a `Retry-After` header.
    public var retryAfter: Int?

    /// Creates an error.
    public init(status: Int, errno: Int, message: String, retryAfter: Int? = nil) {
        self.status = status
        self.errno = errno
        self.message = message
        self.retryAfter = retryAfter
    }

    /// A 400 about a header or the body.
    static func badRequest(_ message: String, errno: Int = 999) -> WebPushAPIError {
        WebPushAPIError(status: 400, errno: errno, message: message)
    }

    /// A 401 about the VAPID credentials (RFC 8292 §4.1).
    static func unauthorized(_ message: String) -> WebPushAPIError {
        WebPushAPIError(status: 401, errno: 109, message: message)
    }

    /// The reason phrase of the status, as the body's `error`.
    public var reason: String {
        switch status {
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 410: "Gone"
        case 413: "Payload Too Large"
        case 415: "Unsupported Media Type"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        default: status >= 500 ? "Server Error" : "Client Error"
        }
    }

    /// The JSON body.
    public var body: Data {
        let object: JSONValue = [
            "code": .int(Int64(status)), "errno": .int(Int64(errno)), "error": .string(reason),
            "message": .string(message), "more_info": "https://mozilla-services.github.io/autopush-rs/errors.html",
        ]
        return Data(object.jsonBytes)
    }

    /// The response that carries this error: autopush's shape, or `distributor`'s.
    func response(delay: Duration = .zero, distributor: WebPushDistributor? = nil) -> SimulatorProviderResponse {
        var headers: [(name: String, value: String)] = [("content-type", "application/json")]
        if let retryAfter { headers.append(("retry-after", String(retryAfter))) }
        switch distributor {
        case nil:
            return SimulatorProviderResponse(status: status, headers: headers, body: body, delay: delay)
        case .ntfy:
            // ntfy's envelope: a five-digit code (the status and a number), the status, and the error text.
            let object: JSONValue = [
                "code": .int(Int64(status * 100 + 1)), "http": .int(Int64(status)), "error": .string(message),
            ]
            return SimulatorProviderResponse(
                status: status, headers: headers, body: Data(object.jsonBytes), delay: delay)
        }
    }
}
