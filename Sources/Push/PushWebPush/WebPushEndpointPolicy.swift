import Foundation
import Push

/// Which push-service endpoints mailboxd sends to. Endpoints are URLs chosen by clients, so a subscription could
/// aim mailboxd at an internal service (server-side request forgery); the policy refuses that twice:
///
/// - at registration, on the URL: `https` only, no user info, no fragment; a host that is an IP literal in a
///   loopback, link-local, private, shared, unspecified or multicast range, or the name `localhost` (or under
///   `.localhost`), is refused with 400;
/// - at connection time, on every address the host resolves to (``permitsAddress(_:)``): the same ranges, so a
///   public name that resolves to an internal address is never connected to.
///
/// A host listed in `allowedHosts` (`host` or `host:port`, as `--webpush-allow-host` gives them) is exempt from
/// both: the way a local push service (webpush-sim) on loopback is reached.
public struct WebPushEndpointPolicy: Sendable {
    /// Hosts exempt from the address rules, lower-cased: `host` (any port) or `host:port`.
    public var allowedHosts: Set<String>
    /// The longest endpoint accepted, in bytes.
    public static let maximumLength = 1024

    /// Creates a policy.
    public init(allowedHosts: some Sequence<String> = []) {
        self.allowedHosts = Set(allowedHosts.map { $0.lowercased() })
    }

    /// An endpoint that passed the URL rules: its origin (`https://host[:port]`, what VAPID's `aud` names and one
    /// connection serves) and its path.
    public struct Endpoint: Sendable, Hashable {
        /// `https://host[:port]`, the host lower-cased, IPv6 in brackets, the default port left out.
        public var origin: String
        /// The host, without brackets.
        public var host: String
        /// The port.
        public var port: Int
        /// The path and query, starting with `/`.
        public var path: String
    }

    /// Checks `endpoint` and splits it; throws `invalidEndpoint` with the rule it breaks (never the URL).
    public func check(_ endpoint: String) throws(RegistrationError) -> Endpoint {
        guard endpoint.utf8.count <= Self.maximumLength else {
            throw Self.refusal("is longer than \(Self.maximumLength) bytes")
        }
        guard endpoint.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            throw Self.refusal("holds spaces or characters outside printable ASCII")
        }
        guard let components = URLComponents(string: endpoint), let scheme = components.scheme?.lowercased(),
            let rawHost = components.host, !rawHost.isEmpty
        else { throw Self.refusal("is not an absolute URL") }
        guard scheme == "https" else { throw Self.refusal("must be https") }
        guard components.user == nil, components.password == nil, components.fragment == nil else {
            throw Self.refusal("must not hold user information or a fragment")
        }
        var host = rawHost.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        if host.hasSuffix(".") { host.removeLast() }  // `localhost.` is `localhost`
        guard !host.isEmpty else { throw Self.refusal("has no host") }
        let port = components.port ?? 443
        guard (1...65535).contains(port) else { throw Self.refusal("has an invalid port") }
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        let query = components.percentEncodedQuery.map { "?" + $0 } ?? ""
        let bracketed = host.contains(":") ? "[\(host)]" : host
        let origin = "https://" + bracketed + (port == 443 ? "" : ":\(port)")
        let checked = Endpoint(origin: origin, host: host, port: port, path: path + query)
        if isAllowed(checked) { return checked }
        if host == "localhost" || host.hasSuffix(".localhost") {
            throw Self.refusal("names a loopback host (allow it with --webpush-allow-host)")
        }
        if let range = AddressRange.of(host), range != .public {
            throw Self.refusal("is on a \(range.rawValue) address (allow it with --webpush-allow-host)")
        }
        return checked
    }

    /// Whether the endpoint's host (or host and port) is in the allow list.
    public func isAllowed(_ endpoint: Endpoint) -> Bool {
        let bracketed = endpoint.host.contains(":") ? "[\(endpoint.host)]" : endpoint.host
        return allowedHosts.contains(bracketed) || allowedHosts.contains(endpoint.host)
            || allowedHosts.contains("\(bracketed):\(endpoint.port)")
    }

    /// Whether a connection may be opened to the resolved `address` (numeric) of a host not in the allow list.
    public static func permitsAddress(_ address: String) -> Bool {
        AddressRange.of(address) == .public
    }

    private static func refusal(_ rule: String) -> RegistrationError {
        RegistrationError("invalidEndpoint", "The subscription's endpoint \(rule).")
    }
}

/// The range an IP address is in, as far as outbound requests care.
enum AddressRange: String, Sendable {
    case `public`
    case loopback
    case linkLocal = "link-local"
    case `private`
    case shared
    case unspecified
    case multicast
    case reserved

    /// The range of a numeric IPv4 or IPv6 address, or `nil` when `text` is not one. IPv4 is read as the resolver
    /// reads it (`inet_aton`), so the short, octal, hex and decimal forms (`127.1`, `0x7f.1`, `2130706433`) are
    /// the addresses they resolve to, not names.
    static func of(_ text: String) -> AddressRange? {
        var v4 = in_addr()
        if inet_aton(text, &v4) != 0 {
            return ofIPv4(withUnsafeBytes(of: v4.s_addr) { Array($0) })
        }
        var v6 = in6_addr()
        let unscoped = text.split(separator: "%", maxSplits: 1).first.map(String.init) ?? text
        guard inet_pton(AF_INET6, unscoped, &v6) == 1 else { return nil }
        return ofIPv6(withUnsafeBytes(of: v6) { Array($0) })
    }

    static func ofIPv4(_ b: [UInt8]) -> AddressRange {
        switch (b[0], b[1]) {
        case (0, _): return .unspecified
        case (10, _): return .private
        case (100, 64...127): return .shared
        case (127, _): return .loopback
        case (169, 254): return .linkLocal
        case (172, 16...31): return .private
        case (192, 168): return .private
        case (192, 0) where b[2] == 0: return .reserved
        case (198, 18...19): return .reserved
        case (224...239, _): return .multicast
        case (240...255, _): return .reserved
        default: return .public
        }
    }

    static func ofIPv6(_ b: [UInt8]) -> AddressRange {
        if b.allSatisfy({ $0 == 0 }) { return .unspecified }
        if b[0..<15].allSatisfy({ $0 == 0 }) && b[15] == 1 { return .loopback }
        // IPv4-mapped (::ffff:a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) reach the embedded IPv4 address.
        if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xff && b[11] == 0xff { return ofIPv4(Array(b[12...])) }
        if b[0..<12] == [0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0] { return ofIPv4(Array(b[12...])) }
        if b[0..<12].allSatisfy({ $0 == 0 }) { return .reserved }  // deprecated IPv4-compatible
        if b[0] == 0xfe && (b[1] & 0xc0) == 0x80 { return .linkLocal }
        if (b[0] & 0xfe) == 0xfc { return .private }
        if b[0] == 0xff { return .multicast }
        if b[0] == 0xfe && (b[1] & 0xc0) == 0xc0 { return .private }  // deprecated site-local
        return .public
    }
}
