import SimulatorSupport

/// Where the gateway sends a connected device's notifications: one open notification stream.
public typealias APNsDeviceSink = DeviceStreamSink

/// Whether a device token is known to the gateway.
public enum APNsDeviceStatus: Sendable, Equatable {
    /// Never registered.
    case unknown
    /// Registered and not deleted.
    case active(topic: String, environment: APNsEnvironment)
    /// Deleted at this time (milliseconds since 1970).
    case unregistered(timestamp: Int64)
}

/// One active device as the control API lists it.
public struct APNsDeviceSummary: Sendable, Equatable, Encodable {
    /// Its token.
    public var token: String
    /// The topic it registered for.
    public var topic: String
    /// The environment its token belongs to.
    public var environment: APNsEnvironment
    /// `false` while held offline through the control API.
    public var online: Bool
    /// Open notification streams.
    public var streams: Int
    /// Notifications delivered to it.
    public var delivered: Int
    /// Notifications stored for it (APNs keeps at most one).
    public var stored: Int
    /// Background notifications held back by the budget (at most one, the newest).
    public var throttled: Int
    /// The answer scripted for its next sends, if any.
    public var scriptedError: RejectionReason?
}
