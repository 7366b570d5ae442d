import Foundation

/// A response a handler returns: status, headers and either a body or a Server-Sent Events stream.
public struct HTTPResponse: Sendable {
    /// The status code.
    public var status: HTTPStatus
    /// The response header fields. `Content-Length` is computed by the server.
    public var headers: HTTPHeaders
    /// The body bytes (ignored for event-stream responses and `HEAD` requests).
    public var body: Data
    /// The event stream this response delivers, when it was made with `eventStream(_:headers:)`.
    public private(set) var eventStream: EventStream?

    /// Creates a response.
    public init(status: HTTPStatus = .ok, headers: HTTPHeaders = HTTPHeaders(), body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
        self.eventStream = nil
    }

    /// A response whose body is `value` encoded as JSON, with `Content-Type: application/json`.
    public static func json<T: Encodable>(
        _ value: T, status: HTTPStatus = .ok, headers: HTTPHeaders = HTTPHeaders(),
        encoder: JSONEncoder = JSONEncoder()
    ) throws -> HTTPResponse {
        var response = HTTPResponse(status: status, headers: headers, body: try encoder.encode(value))
        response.headers["Content-Type"] = "application/json"
        return response
    }

    /// A response whose body is `json`, JSON text written by hand, with `Content-Type: application/json`.
    public static func json(text json: String, status: HTTPStatus = .ok) -> HTTPResponse {
        .json(data: Data(json.utf8), status: status)
    }

    /// A response whose body is `data`, JSON already encoded, with `Content-Type: application/json`.
    public static func json(data: Data, status: HTTPStatus = .ok) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: data)
    }

    /// A `text/plain; charset=utf-8` response.
    public static func text(_ text: String, status: HTTPStatus = .ok) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "text/plain; charset=utf-8"], body: Data(text.utf8))
    }

    /// An empty response (204 by default).
    public static func empty(status: HTTPStatus = .noContent) -> HTTPResponse { HTTPResponse(status: status) }

    /// A `text/event-stream` response that delivers what is sent on `stream` until either side closes it.
    ///
    /// Create the `EventStream`, keep a reference where publishers find it (and drop it in its
    /// `onTermination` handler), then return this response from the handler.
    public static func eventStream(_ stream: EventStream, headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        var response = HTTPResponse(status: .ok, headers: headers)
        response.headers["Content-Type"] = "text/event-stream"
        response.headers["Cache-Control"] = "no-cache"
        response.headers["X-Accel-Buffering"] = "no"
        response.eventStream = stream
        return response
    }
}
