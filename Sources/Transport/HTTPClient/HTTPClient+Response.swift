import Foundation

extension HTTPClient {
    /// A complete response received by ``HTTPClient/execute(_:)``.
    public struct Response: Sendable {
        /// The status code, e.g. `200`.
        public var status: Int
        /// The response header fields, in the order received; look them up case-insensitively.
        public var headers: HTTPHeaders
        /// The whole response body.
        public var body: Data
        /// The HTTP version the response came with.
        public var version: HTTPVersion

        /// Creates a response value.
        public init(status: Int, headers: HTTPHeaders, body: Data, version: HTTPVersion) {
            self.status = status
            self.headers = headers
            self.body = body
            self.version = version
        }
    }
}
