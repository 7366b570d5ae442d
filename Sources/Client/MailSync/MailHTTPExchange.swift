import Foundation

/// One request to the mailbox server: a method, a path below the server's base URL (with its query), headers and
/// an optional body.
public struct MailHTTPRequest: Sendable, Equatable {
    /// `GET`, `POST`, `PATCH`, `DELETE`.
    public var method: String
    /// The path and query, starting with `/` (e.g. `/v1/changes?since=…`).
    public var path: String
    /// Header fields, in order.
    public var headers: [(name: String, value: String)]
    /// The body, if any.
    public var body: Data?

    /// Creates a request.
    public init(method: String, path: String, headers: [(name: String, value: String)] = [], body: Data? = nil) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
    }

    /// Requests are equal when method, path, body and every header field in order are.
    public static func == (a: MailHTTPRequest, b: MailHTTPRequest) -> Bool {
        a.method == b.method && a.path == b.path && a.body == b.body
            && a.headers.map { [$0.name, $0.value] } == b.headers.map { [$0.name, $0.value] }
    }
}

/// A whole response: its status, its header fields by lowercased name (repeated fields joined with `, `), its body.
public struct MailHTTPResponse: Sendable, Equatable {
    /// The status code.
    public var status: Int
    /// Header fields by lowercased name.
    public var headers: [String: String]
    /// The body.
    public var body: Data

    /// Creates a response.
    public init(status: Int, headers: [String: String], body: Data) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// A response whose body is still arriving (the event stream): its status and headers, then its bytes in chunks.
public struct MailHTTPStream: Sendable {
    /// The status code.
    public var status: Int
    /// Header fields by lowercased name.
    public var headers: [String: String]
    /// The body's chunks as they arrive; it ends when the response does, and throws when the connection fails.
    public var body: AsyncThrowingStream<Data, any Error>
    /// Closes the connection (the body then ends).
    public var cancel: @Sendable () -> Void

    /// Creates a streaming response.
    public init(
        status: Int, headers: [String: String], body: AsyncThrowingStream<Data, any Error>,
        cancel: @escaping @Sendable () -> Void
    ) {
        self.status = status
        self.headers = headers
        self.body = body
        self.cancel = cancel
    }
}

/// The HTTP stack under ``MailAPIClient``: what an app supplies to run the sync engine over its platform's HTTP
/// client. `MailSyncHTTP` implements it over libcurl, `MailSyncURLSession` over `URLSession`.
///
/// An exchange sends requests to one server (it holds the base URL and the TLS trust), follows no redirects, and
/// reports a failure to reach the server or a broken response as ``MailSyncError/network(_:)``; a cancelled task
/// gets `CancellationError`. Status codes are not errors here: ``MailAPIClient`` reads them.
public protocol MailHTTPExchange: Sendable {
    /// Sends the request and returns the whole response.
    func send(_ request: MailHTTPRequest) async throws -> MailHTTPResponse
    /// Sends a `GET` and returns as soon as the status and headers have arrived; the body follows.
    func openStream(_ request: MailHTTPRequest) async throws -> MailHTTPStream
}

extension MailHTTPExchange {
    /// A server's base URL as exchanges keep it: `http://` or `https://`, without a trailing slash.
    public static func normalizedBaseURL(_ url: String) throws -> String {
        var base = url
        while base.hasSuffix("/") { base.removeLast() }
        guard base.hasPrefix("http://") || base.hasPrefix("https://") else {
            throw MailSyncError.invalidResponse("the server URL must start with http:// or https://")
        }
        return base
    }
}
