import Foundation
import NetworkAddress

extension HTTP2Client {
    /// An HTTP proxy connections are tunnelled through with `CONNECT` (RFC 9110 §9.3.6): TLS and HTTP/2 run end to
    /// end inside the tunnel, so the proxy sees where the connection goes and nothing of what it carries.
    ///
    /// Where the tunnel goes: to the origin's name, which the proxy resolves, when the client checks no addresses
    /// (the configured push services' fixed hosts, often on networks whose only way out, DNS included, is the
    /// proxy); to an address resolved and checked here when the client has ``Configuration/permitsAddress`` (URLs a
    /// client chose), so the proxy cannot be steered to an address the check refuses, by DNS rebinding or otherwise.
    public struct Proxy: Sendable, Equatable {
        /// The proxy's host.
        public var host: String
        /// The proxy's port.
        public var port: Int
        /// `user:password` for `Proxy-Authorization: Basic`, when the proxy asks for credentials.
        public var credentials: String?
        /// Hosts reached directly, in the `NO_PROXY` form: `*` is every host, `example.com` is that host and its
        /// subdomains (a leading dot means the same), an address is that address.
        public var directHosts: [String]

        /// Reads `http://[user:password@]host:port` (percent-encoded credentials) and a `NO_PROXY` list (comma- or
        /// space-separated).
        public init(url: String, noProxy: String = "") throws(HTTPClientError) {
            guard url.lowercased().hasPrefix("http://") else {
                throw .invalidRequest("the proxy URL must be http://[user:password@]host:port")
            }
            var rest = Substring(url.dropFirst("http://".count))
            if rest.hasSuffix("/") { rest = rest.dropLast() }
            guard !rest.contains("/"), !rest.contains("?"), !rest.contains("#") else {
                throw .invalidRequest("the proxy URL must be http://[user:password@]host:port, without a path")
            }
            if let at = rest.lastIndex(of: "@") {
                let userInfo = rest[..<at]
                guard let decoded = String(userInfo).removingPercentEncoding, decoded.contains(":") else {
                    throw .invalidRequest("the proxy URL's credentials must be user:password")
                }
                credentials = decoded
                rest = rest[rest.index(after: at)...]
            }
            let parts: (host: Substring, port: Substring?)
            do {
                parts = try HostPortSyntax.split(rest)
            } catch {
                throw .invalidRequest("the proxy URL has \(error)")
            }
            guard !parts.host.isEmpty else { throw .invalidRequest("the proxy URL has no host") }
            guard let portText = parts.port, let port = HostPortSyntax.port(portText) else {
                throw .invalidRequest("the proxy URL needs a port from 1 to 65535")
            }
            host = String(parts.host)
            self.port = Int(port)
            directHosts = noProxy.split(whereSeparator: { $0 == "," || $0 == " " }).map {
                $0.hasPrefix(".") ? String($0.dropFirst()).lowercased() : $0.lowercased()
            }
        }

        /// Whether connections to `host` go through the proxy (`false`: `directHosts` names it).
        public func applies(to host: String) -> Bool {
            let name = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
            return !directHosts.contains { entry in
                entry == "*" || entry == name || name.hasSuffix("." + entry)
            }
        }

        /// The `Proxy-Authorization` value, when there are credentials.
        var authorization: String? { credentials.map { "Basic " + Data($0.utf8).base64EncodedString() } }

        /// The proxy as `host:port`, for messages (never the credentials).
        var displayName: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }
}
