/// An HTTP response status code.
public struct HTTPStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible,
    ExpressibleByIntegerLiteral
{
    /// The numeric code (`200`, `404`, …).
    public let rawValue: Int

    /// Creates a status from its numeric code.
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Creates a status from an integer literal such as `201`.
    public init(integerLiteral value: Int) { self.rawValue = value }

    /// The numeric code as text.
    public var description: String { String(rawValue) }

    /// 200 OK.
    public static let ok: HTTPStatus = 200
    /// 201 Created.
    public static let created: HTTPStatus = 201
    /// 202 Accepted.
    public static let accepted: HTTPStatus = 202
    /// 204 No Content.
    public static let noContent: HTTPStatus = 204
    /// 400 Bad Request.
    public static let badRequest: HTTPStatus = 400
    /// 401 Unauthorized.
    public static let unauthorized: HTTPStatus = 401
    /// 403 Forbidden.
    public static let forbidden: HTTPStatus = 403
    /// 303: see the resource at `Location` (with GET), as after a form's POST.
    public static let seeOther: HTTPStatus = 303
    /// 404 Not Found.
    public static let notFound: HTTPStatus = 404
    /// 405 Method Not Allowed.
    public static let methodNotAllowed: HTTPStatus = 405
    /// 409 Conflict.
    public static let conflict: HTTPStatus = 409
    /// 410 Gone.
    public static let gone: HTTPStatus = 410
    /// 413 Content Too Large.
    public static let payloadTooLarge: HTTPStatus = 413
    /// 415 Unsupported Media Type.
    public static let unsupportedMediaType: HTTPStatus = 415
    /// 422 Unprocessable Content.
    public static let unprocessableEntity: HTTPStatus = 422
    /// 429 Too Many Requests.
    public static let tooManyRequests: HTTPStatus = 429
    /// 500 Internal Server Error.
    public static let internalServerError: HTTPStatus = 500
    /// 503 Service Unavailable.
    public static let serviceUnavailable: HTTPStatus = 503
    /// 504 Gateway Timeout.
    public static let gatewayTimeout: HTTPStatus = 504
}
