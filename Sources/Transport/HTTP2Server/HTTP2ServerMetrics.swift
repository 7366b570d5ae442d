/// Counters describing what a server has done since it started.
public struct HTTP2ServerMetrics: Sendable, Hashable {
    /// Connections accepted in total.
    public var connectionsAccepted: Int = 0
    /// Connections open right now (TLS handshakes in progress included).
    public var connectionsOpen: Int = 0
    /// Streams that received a complete response.
    public var streamsServed: Int = 0
    /// Streams that closed without a complete response (reset, cancelled or cut off).
    public var streamsReset: Int = 0
    /// Requests refused because their body exceeded the configured limit.
    public var requestsTooLarge: Int = 0
    /// Connections closed because of a TLS or HTTP/2 protocol error.
    public var protocolErrors: Int = 0
    /// GOAWAY frames queued (handler requests, idle timeouts and shutdown).
    public var goAwaysSent: Int = 0

    /// Creates zeroed counters.
    public init() {}
}
