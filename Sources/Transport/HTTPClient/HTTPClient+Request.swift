import Foundation

extension HTTPClient {
    /// A request to send with ``HTTPClient``.
    public struct Request: Sendable {
        /// The request method.
        public var method: HTTPMethod
        /// The absolute URL, e.g. `https://127.0.0.1:8443/v1/changes?since=12`.
        public var url: String
        /// The request header fields, sent in order. Never logged.
        public var headers: HTTPHeaders
        /// The request body, or `nil` for none. Never logged.
        public var body: Data?
        /// The total time allowed for this request (connecting, sending and receiving the whole response).
        ///
        /// `nil` uses ``HTTPClient/Configuration/requestTimeout`` for ``HTTPClient/execute(_:)`` and no limit
        /// for ``HTTPClient/stream(_:)``.
        public var timeout: Duration?

        /// Creates a request.
        public init(
            method: HTTPMethod = .get, url: String, headers: HTTPHeaders = [:], body: Data? = nil,
            timeout: Duration? = nil
        ) {
            self.method = method
            self.url = url
            self.headers = headers
            self.body = body
            self.timeout = timeout
        }
    }
}
