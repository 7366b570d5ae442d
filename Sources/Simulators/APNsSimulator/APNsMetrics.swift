import ServiceMetrics

/// Counters describing what an ``APNsGateway`` has done, renderable as Prometheus text.
public struct APNsMetrics: Sendable, Equatable {
    /// A response status with its error reason (empty for 200).
    public struct Response: Sendable, Hashable {
        /// The HTTP status.
        public var status: Int
        /// The error reason, or `""` for a success.
        public var reason: String

        /// Creates a key.
        public init(status: Int, reason: String) {
            self.status = status
            self.reason = reason
        }
    }

    /// Provider responses by status and reason.
    public var responses: [Response: Int] = [:]
    /// Notifications sent to a connected device.
    public var delivered = 0
    /// Notifications kept for an offline device.
    public var stored = 0
    /// Background notifications held back by the budget.
    public var throttled = 0
    /// Notifications replaced by a later one before delivery.
    public var coalesced = 0
    /// Notifications whose expiration passed before delivery.
    public var expired = 0
    /// Notifications accepted and never delivered (fault, expiration 0 while offline, deleted device).
    public var dropped = 0
    /// Devices registered and not deleted.
    public var registeredDevices = 0
    /// Devices with at least one open notification stream.
    public var connectedDevices = 0
    /// Open notification streams.
    public var eventStreams = 0
    /// Provider-token signature checks (the rest were served from the cache).
    public var tokenVerifications = 0

    /// Creates zeroed counters.
    public init() {}

    /// The total number of provider requests answered.
    public var requests: Int { responses.values.reduce(0, +) }

    /// The counters in the Prometheus text exposition format.
    public var prometheusText: String {
        var page = PrometheusText()
        page.family(
            "apns_sim_provider_requests_total", .counter, help: "Provider API requests by response status and reason.")
        for (key, count) in responses.sorted(by: { ($0.key.status, $0.key.reason) < ($1.key.status, $1.key.reason) }) {
            page.sample(
                "apns_sim_provider_requests_total", labels: ["status": String(key.status), "reason": key.reason],
                Double(count))
        }
        for (name, kind, help, value) in [
            (
                "apns_sim_notifications_delivered_total", PrometheusText.Kind.counter,
                "Notifications sent to a connected device.", delivered
            ),
            ("apns_sim_notifications_stored_total", .counter, "Notifications stored for an offline device.", stored),
            ("apns_sim_notifications_throttled_total", .counter, "Background notifications held back.", throttled),
            ("apns_sim_notifications_coalesced_total", .counter, "Notifications replaced before delivery.", coalesced),
            ("apns_sim_notifications_expired_total", .counter, "Notifications expired before delivery.", expired),
            ("apns_sim_notifications_dropped_total", .counter, "Notifications accepted and never delivered.", dropped),
            ("apns_sim_registered_devices", .gauge, "Registered devices.", registeredDevices),
            ("apns_sim_connected_devices", .gauge, "Devices with an open notification stream.", connectedDevices),
            ("apns_sim_event_streams", .gauge, "Open notification streams.", eventStreams),
            (
                "apns_sim_provider_token_verifications_total", .counter, "Provider token signature checks.",
                tokenVerifications
            ),
        ] {
            page.single(name, kind, help: help, Double(value))
        }
        return page.text
    }
}
