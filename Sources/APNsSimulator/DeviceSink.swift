/// Where the gateway sends a connected device's notifications: one open notification stream.
public struct DeviceSink: Sendable {
    /// Sends one event's data (single-line JSON); returns `false` when the stream is gone.
    public var send: @Sendable (String) -> Bool
    /// Ends the stream (the device was deleted or the simulator is stopping).
    public var close: @Sendable () -> Void

    /// Creates a sink from its two operations.
    public init(send: @escaping @Sendable (String) -> Bool, close: @escaping @Sendable () -> Void) {
        self.send = send
        self.close = close
    }
}

/// Whether a device token is known to the gateway.
public enum DeviceStatus: Sendable, Equatable {
    /// Never registered.
    case unknown
    /// Registered and not deleted.
    case active(topic: String, environment: String)
    /// Deleted at this time (milliseconds since 1970).
    case unregistered(timestamp: Int64)
}
