import Foundation
import SimulatorSupport

/// The policy of an ``FCMGateway``: whom it trusts and Android's delivery limits.
public struct FCMGatewayConfiguration: Sendable {
    /// The trusted service accounts (each for its project).
    public var serviceAccounts: [FCMServiceAccount]
    /// Lifetime of issued access tokens, in seconds (Google: 3600).
    public var tokenLifetime: Int
    /// Sends per project per minute; `nil` for no limit.
    public var projectQuotaPerMinute: Int?
    /// Sends per device per minute; `nil` for no limit (FCM: 240).
    public var deviceRatePerMinute: Int?
    /// Collapsible messages a device gets in a burst before the throttle holds them back (Android: 20).
    public var collapsibleBurst: Int
    /// Seconds to earn one more collapsible message after the burst (Android: 180).
    public var collapsibleRefillSeconds: Double
    /// Distinct collapse keys kept for an offline device (Android: 4).
    public var maxCollapseKeys: Int
    /// Non-collapsible messages kept for an offline device (Android: 100; the oldest go first).
    public var maxPendingMessages: Int
    /// The faults in force at start.
    public var faults: SimulatorFaults
    /// Request bodies longer than this are cut in the capture log.
    public var logBodyLimit: Int
    /// The capture log keeps at most this many entries (the oldest go first).
    public var logCapacity: Int

    /// Creates a configuration; the defaults are FCM's and Android's.
    public init(
        serviceAccounts: [FCMServiceAccount] = [], tokenLifetime: Int = 3600, projectQuotaPerMinute: Int? = nil,
        deviceRatePerMinute: Int? = 240, collapsibleBurst: Int = 20, collapsibleRefillSeconds: Double = 180,
        maxCollapseKeys: Int = 4, maxPendingMessages: Int = 100, faults: SimulatorFaults = SimulatorFaults(),
        logBodyLimit: Int = 16 * 1024, logCapacity: Int = 100_000
    ) {
        self.serviceAccounts = serviceAccounts
        self.tokenLifetime = tokenLifetime
        self.projectQuotaPerMinute = projectQuotaPerMinute
        self.deviceRatePerMinute = deviceRatePerMinute
        self.collapsibleBurst = collapsibleBurst
        self.collapsibleRefillSeconds = collapsibleRefillSeconds
        self.maxCollapseKeys = maxCollapseKeys
        self.maxPendingMessages = maxPendingMessages
        self.faults = faults
        self.logBodyLimit = logBodyLimit
        self.logCapacity = logCapacity
    }
}

/// Where an ``FCMSimulatorServer`` listens, and its gateway policy.
public struct FCMSimulatorConfiguration: Sendable {
    /// PEM files for the provider listener's TLS.
    public typealias TLSFiles = SimulatorTLSFiles

    /// The provider listener's address (TLS; HTTP/2 and HTTP/1.1 on one port).
    public var providerHost: String
    /// The provider listener's port; `0` picks a free one.
    public var providerPort: Int
    /// TLS for the provider listener; `nil` serves cleartext HTTP/2 only (h2c, for tests).
    public var tls: TLSFiles?
    /// The device API's address (HTTP/1.1).
    public var deviceHost: String
    /// The device API's port; `0` picks a free one.
    public var devicePort: Int
    /// The most simultaneous device-API connections (message streams included).
    public var deviceConnectionLimit: Int
    /// Interval of keep-alive comments on message streams.
    public var heartbeat: Duration
    /// How often delayed work (throttled messages, expirations) is processed.
    public var tickInterval: Duration
    /// The gateway policy.
    public var gateway: FCMGatewayConfiguration
    /// The only source addresses the provider listener serves (`--allow-peer`); empty: every one.
    public var allowedPeers: Set<String> = []

    /// Creates a configuration; the defaults are fcm-sim's.
    public init(
        providerHost: String = "127.0.0.1", providerPort: Int = 2297, tls: TLSFiles? = nil,
        deviceHost: String = "127.0.0.1", devicePort: Int = 2298, deviceConnectionLimit: Int = 16_384,
        heartbeat: Duration = .seconds(15), tickInterval: Duration = .milliseconds(200),
        gateway: FCMGatewayConfiguration = FCMGatewayConfiguration()
    ) {
        self.providerHost = providerHost
        self.providerPort = providerPort
        self.tls = tls
        self.deviceHost = deviceHost
        self.devicePort = devicePort
        self.deviceConnectionLimit = deviceConnectionLimit
        self.heartbeat = heartbeat
        self.tickInterval = tickInterval
        self.gateway = gateway
    }
}
