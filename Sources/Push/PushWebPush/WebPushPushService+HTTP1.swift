import Foundation
import HTTP2Client
import HTTPClient
import Push

/// Push services that speak HTTP/1.1 only. Browser vendors' push services speak HTTP/2, but a UnifiedPush
/// distributor is often a self-hosted server behind one that does not: its TLS handshake selects no `h2`. The
/// sender then goes on with HTTP/1.1 to that origin, through libcurl, with the same rules: the address is resolved
/// and checked here (unless the origin is an allowed host) and libcurl is told to connect to that address only
/// (through a proxy, the tunnel is asked for it), no redirect is followed, the answer is bounded.
extension WebPushPushService {
    /// An origin's HTTP/1.1 client (pinned to the address checked when it was made), kept for its later signals.
    struct HTTP1Origin: Sendable {
        let client: HTTPClient
    }

    /// The HTTP/1.1 client for `endpoint`'s origin, made when the origin first turned down HTTP/2; `nil` when no
    /// address of the origin passes the check.
    func http1Client(for endpoint: WebPushEndpointPolicy.Endpoint) -> HTTPClient? {
        if let known = http1Origins.withLock({ $0[endpoint.origin] }) { return known.client }
        let exempt = configuration.endpointPolicy.isAllowed(endpoint)
        let permits: (@Sendable (String) -> Bool)? = exempt ? nil : WebPushEndpointPolicy.permitsAddress
        guard
            let address = try? HTTP2Client.resolve(endpoint.host, port: endpoint.port, permits: permits).first?.numeric
        else { return nil }
        let bracketed = { (host: String) in host.contains(":") ? "[\(host)]" : host }
        var proxyURL: String?
        if let proxy = configuration.proxy, proxy.applies(to: endpoint.host) {
            var userinfo = ""
            if let credentials = proxy.credentials {
                let parts = credentials.split(separator: ":", maxSplits: 1).map(String.init)
                let user = parts[0].addingPercentEncoding(withAllowedCharacters: .urlUserAllowed) ?? ""
                let password =
                    parts.count > 1
                    ? ":" + (parts[1].addingPercentEncoding(withAllowedCharacters: .urlPasswordAllowed) ?? "") : ""
                userinfo = user + password + "@"
            }
            proxyURL = "http://\(userinfo)\(bracketed(proxy.host)):\(proxy.port)"
        }
        let client = HTTPClient(
            configuration: .init(
                httpVersion: .http1, tls: .init(caFile: configuration.caFile), connectTimeout: .seconds(5),
                requestTimeout: .seconds(15), maximumConnectionsPerHost: 4, maximumResponseBodySize: 16 << 10,
                userAgent: nil, proxy: proxyURL,
                connectTo: ["\(bracketed(endpoint.host)):\(endpoint.port):\(bracketed(address)):\(endpoint.port)"]))
        let kept: (client: HTTPClient, unused: [HTTPClient]) = http1Origins.withLock { origins in
            if let raced = origins[endpoint.origin] { return (raced.client, [client]) }
            var retired: [HTTPClient] = []
            if origins.count >= Self.maximumOrigins, let victim = origins.keys.first {
                retired = origins.removeValue(forKey: victim).map { [$0.client] } ?? []
            }
            origins[endpoint.origin] = HTTP1Origin(client: client)
            return (client, retired)
        }
        for unused in kept.unused { unused.shutdown() }
        return kept.client
    }

    /// POSTs over HTTP/1.1 what ``post(_:to:topic:urgency:authorization:contentType:)`` would over HTTP/2.
    func postHTTP1(
        _ body: [UInt8], to endpoint: WebPushEndpointPolicy.Endpoint, headers: [HTTPField]
    ) async -> PushOutcome {
        guard let client = http1Client(for: endpoint) else { return .defect(reason: "endpointRefused") }
        var fields = HTTPHeaders()
        for header in headers { fields.add(name: header.name, value: header.value) }
        let response: HTTPClient.Response
        do {
            response = try await client.execute(
                HTTPClient.Request(
                    method: .post, url: endpoint.origin + endpoint.path, headers: fields, body: Data(body)))
        } catch {
            return .retry(reason: "transport", retryAfter: nil)
        }
        return WebPushAnswer(status: response.status, retryAfterHeader: response.headers["retry-after"]).outcome
    }
}
