import Foundation
import SimulatorSupport

/// The policy of a ``WebPushGateway``: where its endpoints point and the push service's limits.
public struct WebPushGatewayConfiguration: Sendable {
    /// What every push endpoint starts with (`https://webpush-sim:2201`); the VAPID `aud` must be its origin.
    /// A server started without an explicit base replaces it with its bound address.
    public var endpointBase: String
    /// The largest body accepted (RFC 8030 §7.2: at least 4096 bytes must be accepted; autopush: 4096).
    public var maxBodyBytes: Int
    /// The largest TTL kept; longer ones are cut to it and the answer's `TTL` says so (autopush: 60 days).
    public var maxTTL: Int
    /// How far in the future a VAPID token's `exp` may be (RFC 8292 §2: 24 hours).
    public var maxTokenLifetime: Int
    /// The faults in force at start.
    public var faults: SimulatorFaults
    /// The capture log keeps at most this many entries (the oldest go first).
    public var logCapacity: Int
    /// Answer as this UnifiedPush distributor does instead of as a browser vendor's push service (`nil`).
    public var distributor: WebPushDistributor?

    /// Creates a configuration; the defaults are a real push service's.
    public init(
        endpointBase: String = "https://127.0.0.1:2201", maxBodyBytes: Int = 4096, maxTTL: Int = 60 * 86_400,
        maxTokenLifetime: Int = 86_400,
        faults: SimulatorFaults = SimulatorFaults(), logCapacity: Int = 100_000, distributor: WebPushDistributor? = nil
    ) {
        self.endpointBase = endpointBase.hasSuffix("/") ? String(endpointBase.dropLast()) : endpointBase
        self.maxBodyBytes = maxBodyBytes
        self.maxTTL = maxTTL
        self.maxTokenLifetime = maxTokenLifetime
        self.faults = faults
        self.logCapacity = logCapacity
        self.distributor = distributor
    }

    /// The origin of ``endpointBase`` as RFC 6454 serializes it (scheme and host lower-cased, the default port
    /// left out): the only `aud` a VAPID token for these endpoints may carry.
    public var origin: String { Self.origin(of: endpointBase) ?? endpointBase }

    /// The serialized origin of `url`, or `nil` when it is not an absolute http(s) URL.
    static func origin(of url: String) -> String? {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            scheme == "https" || scheme == "http", let host = components.host, !host.isEmpty
        else { return nil }
        let defaultPort = scheme == "https" ? 443 : 80
        let port = components.port.flatMap { $0 == defaultPort ? nil : $0 }
        return "\(scheme)://\(host.lowercased())" + (port.map { ":\($0)" } ?? "")
    }
}

/// Where a ``WebPushSimulatorServer`` listens, and its gateway policy.
public struct WebPushSimulatorConfiguration: Sendable {
    /// PEM files for the push-resource listener's TLS.
    public typealias TLSFiles = SimulatorTLSFiles

    /// The push-resource listener's address (TLS; HTTP/2 and HTTP/1.1 on one port).
    public var providerHost: String
    /// Its port; `0` picks a free one.
    public var providerPort: Int
    /// TLS for the push-resource listener; `nil` serves cleartext HTTP/2 only (h2c, for tests).
    public var tls: TLSFiles?
    /// The device and control API's address (HTTP/1.1).
    public var deviceHost: String
    /// Its port; `0` picks a free one.
    public var devicePort: Int
    /// The Mozilla WebSocket push protocol's address (plain `ws`); `nil` for none.
    public var mozillaHost: String?
    /// Its port; `0` picks a free one.
    public var mozillaPort: Int
    /// The most simultaneous device-API connections (message streams included).
    public var deviceConnectionLimit: Int
    /// Interval of keep-alive comments on message streams.
    public var heartbeat: Duration
    /// How often expirations are processed.
    public var tickInterval: Duration
    /// What push endpoints start with; `nil`: `https://<providerHost>:<bound port>` (it replaces the gateway's).
    public var endpointBase: String?
    /// The gateway policy.
    public var gateway: WebPushGatewayConfiguration
    /// The only source addresses the provider listener serves (`--allow-peer`); empty: every one.
    public var allowedPeers: Set<String> = []

    /// Creates a configuration; the defaults are webpush-sim's.
    public init(
        providerHost: String = "127.0.0.1", providerPort: Int = 2201, tls: TLSFiles? = nil,
        deviceHost: String = "127.0.0.1", devicePort: Int = 2202, mozillaHost: String? = nil, mozillaPort: Int = 0,
        deviceConnectionLimit: Int = 16_384, heartbeat: Duration = .seconds(15),
        tickInterval: Duration = .milliseconds(200), endpointBase: String? = nil,
        gateway: WebPushGatewayConfiguration = WebPushGatewayConfiguration()
    ) {
        self.providerHost = providerHost
        self.providerPort = providerPort
        self.tls = tls
        self.deviceHost = deviceHost
        self.devicePort = devicePort
        self.mozillaHost = mozillaHost
        self.mozillaPort = mozillaPort
        self.deviceConnectionLimit = deviceConnectionLimit
        self.heartbeat = heartbeat
        self.tickInterval = tickInterval
        self.endpointBase = endpointBase
        self.gateway = gateway
    }
}

/// A UnifiedPush distributor whose server webpush-sim can answer as, for Android apps without Google's services.
/// Its endpoints are Web Push endpoints (RFC 8291 bodies of at most 4096 bytes, VAPID), but the server is not a
/// browser vendor's.
public enum WebPushDistributor: String, Sendable, CaseIterable {
    /// ntfy (self-hosted or ntfy.sh), as its `up…` topics answer: HTTP/1.1 only; `200` with the message as JSON;
    /// errors as `{"code","http","error"}` (`41301` too large, `42901` too many requests, `40401` unknown topic);
    /// no `Topic` replacement (every message is kept); a request budget per topic (a burst of 60, then one every
    /// 5 seconds) answered with `429`.
    case ntfy
}
