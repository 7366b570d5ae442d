import Foundation
import HTTP2Server
import HTTPServer
import HTTPTypes

/// A provider request as either transport of a simulator's provider listener (HTTP/2, or HTTP/1.1 relayed over
/// TLS) hands it over.
public struct SimulatorProviderRequest: Sendable {
    /// The method (`POST`).
    public var method: String
    /// The path, query included.
    public var path: String
    /// The headers as received.
    public var headers: [(name: String, value: String)]
    /// The body.
    public var body: Data
    /// The protocol it arrived in: `HTTP/2` or `HTTP/1.1`.
    public var httpVersion: String

    /// Creates a request.
    public init(
        method: String, path: String, headers: [(name: String, value: String)], body: Data,
        httpVersion: String = "HTTP/2"
    ) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.httpVersion = httpVersion
    }

    /// The first header called `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { HTTPHeaders.namesMatch($0.name, name) }?.value
    }
}

/// A simulator's answer to a provider request, for either transport.
public struct SimulatorProviderResponse: Sendable {
    /// The HTTP status.
    public var status: Int
    /// Response headers (`content-type`, `retry-after`, a push service's `location` and `ttl`).
    public var headers: [(name: String, value: String)]
    /// The body (JSON, or empty).
    public var body: Data
    /// How long to hold the response back (the latency fault).
    public var delay: Duration

    /// Creates a response.
    public init(
        status: Int, headers: [(name: String, value: String)] = [], body: Data = Data(), delay: Duration = .zero
    ) {
        self.status = status
        self.headers = headers
        self.body = body
        self.delay = delay
    }

    /// The first header called `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { HTTPHeaders.namesMatch($0.name, name) }?.value
    }

    /// The body as JSON, for tests.
    public var json: [String: Any]? { try? JSONSerialization.jsonObject(with: body) as? [String: Any] }
}

extension SimulatorProviderRequest {
    /// The request as HTTP2Server received it.
    package init(_ request: HTTP2Request) {
        self.init(
            method: request.method, path: request.path, headers: request.headers.map { ($0.name, $0.value) },
            body: request.body, httpVersion: "HTTP/2")
    }

    /// The request as the HTTP/1.1 relay target received it.
    package init(_ request: HTTPRequest) {
        let path = request.queryString.isEmpty ? request.path : request.path + "?" + request.queryString
        self.init(
            method: request.method.rawValue, path: path, headers: request.headers.map { ($0.name, $0.value) },
            body: request.body, httpVersion: "HTTP/1.1")
    }
}

extension HTTP2Response {
    /// The answer for a provider request.
    package init(_ response: SimulatorProviderResponse) {
        self.init(
            status: response.status, headers: response.headers.map { HTTPField($0.name, $0.value) },
            body: response.body, delay: response.delay)
    }
}

extension HTTPResponse {
    /// The answer for a provider request.
    package init(_ response: SimulatorProviderResponse) {
        self.init(
            status: HTTPStatus(rawValue: response.status),
            headers: HTTPHeaders(response.headers.map { ($0.name, $0.value) }),
            body: response.body)
    }
}
