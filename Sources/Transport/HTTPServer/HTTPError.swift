import Foundation
import JSONText

/// An error a handler throws to answer with a specific status and a JSON body
/// `{"error": code, "message": message}`.
///
/// Any other error thrown by a handler becomes a 500 `internalError` with a generic message.
public struct HTTPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The response status.
    public var status: HTTPStatus
    /// The machine-readable error code (`"notFound"`, `"invalidJSON"`, …).
    public var code: String
    /// A human-readable explanation; must not contain request content or secrets.
    public var message: String
    /// Extra response headers (for example `Allow` or `Retry-After`).
    public var headers: HTTPHeaders

    /// Creates an error response description.
    public init(_ status: HTTPStatus, code: String, message: String, headers: HTTPHeaders = HTTPHeaders()) {
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
    }

    /// `status code: message`.
    public var description: String { "\(status.rawValue) \(code): \(message)" }

    /// The JSON response this error renders as.
    public var response: HTTPResponse {
        var response = HTTPResponse(status: status, headers: headers)
        response.headers["Content-Type"] = "application/json"
        response.body = Self.body(code: code, message: message)
        return response
    }

    static func body(code: String, message: String) -> Data {
        let object: JSONValue = ["error": .string(code), "message": .string(message)]
        return Data(object.jsonBytes)
    }

    /// 400 with the given code (default `badRequest`).
    public static func badRequest(_ message: String, code: String = "badRequest") -> HTTPError {
        HTTPError(.badRequest, code: code, message: message)
    }

    /// 400 `invalidRequest`: the request is well-formed JSON but its content is not acceptable.
    public static func invalidRequest(_ message: String) -> HTTPError {
        HTTPError(.badRequest, code: "invalidRequest", message: message)
    }

    /// 401 `unauthorized`.
    public static func unauthorized(_ message: String = "Authentication is required.") -> HTTPError {
        HTTPError(.unauthorized, code: "unauthorized", message: message, headers: ["WWW-Authenticate": "Bearer"])
    }

    /// 403 `forbidden`.
    public static func forbidden(_ message: String = "Access is denied.") -> HTTPError {
        HTTPError(.forbidden, code: "forbidden", message: message)
    }

    /// 404 `notFound`.
    public static func notFound(_ message: String = "The resource does not exist.") -> HTTPError {
        HTTPError(.notFound, code: "notFound", message: message)
    }

    /// 409 `conflict`.
    public static func conflict(_ message: String) -> HTTPError {
        HTTPError(.conflict, code: "conflict", message: message)
    }

    /// 500 `internalError` with a generic message.
    public static let internalError = HTTPError(
        .internalServerError, code: "internalError", message: "The server failed to process the request.")
}
