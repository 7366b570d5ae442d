import SimulatorSupport

/// Where an ``APNsSimulatorServer`` listens and which gateway policy it applies.
public struct APNsSimulatorConfiguration: Sendable {
    /// PEM files for the provider side's TLS.
    public typealias TLSFiles = SimulatorTLSFiles

    /// The provider API's address (HTTP/2).
    public var providerHost: String
    /// The provider API's port; `0` picks a free one.
    public var providerPort: Int
    /// TLS for the provider API; `nil` serves cleartext HTTP/2 (h2c).
    public var tls: TLSFiles?
    /// The sandbox provider listener's address (same TLS, keys and topics as the production one).
    public var sandboxHost: String
    /// The sandbox provider listener's port (`0` picks a free one); `nil` for none, in which case the one
    /// provider listener serves both environments and accepts any registered token.
    public var sandboxPort: Int?
    /// The device API's address (HTTP/1.1).
    public var deviceHost: String
    /// The device API's port; `0` picks a free one.
    public var devicePort: Int
    /// The most simultaneous device-API connections (notification streams included).
    public var deviceConnectionLimit: Int
    /// Worker threads of the device API.
    public var deviceThreads: Int
    /// Interval of keep-alive comments on notification streams.
    public var heartbeat: Duration
    /// How often delayed work (throttled pushes, expirations) is processed.
    public var tickInterval: Duration
    /// The gateway policy.
    public var gateway: APNsGatewayConfiguration
    /// The only source addresses the provider listener serves (`--allow-peer`); empty: every one.
    public var allowedPeers: Set<String> = []

    /// Creates a configuration; the defaults are the documented `apns-sim` defaults.
    public init(
        providerHost: String = "127.0.0.1", providerPort: Int = 2197, tls: TLSFiles? = nil,
        sandboxHost: String = "127.0.0.1", sandboxPort: Int? = nil, deviceHost: String = "127.0.0.1",
        devicePort: Int = 2198, deviceConnectionLimit: Int = 16_384,
        deviceThreads: Int = 2, heartbeat: Duration = .seconds(15), tickInterval: Duration = .milliseconds(200),
        gateway: APNsGatewayConfiguration = APNsGatewayConfiguration()
    ) {
        self.providerHost = providerHost
        self.providerPort = providerPort
        self.tls = tls
        self.sandboxHost = sandboxHost
        self.sandboxPort = sandboxPort
        self.deviceHost = deviceHost
        self.devicePort = devicePort
        self.deviceConnectionLimit = deviceConnectionLimit
        self.deviceThreads = deviceThreads
        self.heartbeat = heartbeat
        self.tickInterval = tickInterval
        self.gateway = gateway
    }
}
