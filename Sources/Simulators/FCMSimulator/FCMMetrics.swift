import ServiceMetrics

/// Counters describing what an ``FCMGateway`` has done, renderable as Prometheus text.
public struct FCMMetrics: Sendable, Equatable {
    /// A provider response's status with its FCM error code (`""` for a success).
    public struct Response: Sendable, Hashable {
        /// The HTTP status.
        public var status: Int
        /// The `errorCode`, or `""`.
        public var errorCode: String

        /// Creates a key.
        public init(status: Int, errorCode: String) {
            self.status = status
            self.errorCode = errorCode
        }
    }

    /// `messages:send` responses by status and error code.
    public var responses: [Response: Int] = [:]
    /// Token requests by service account (`client_email`; unknown issuers under `""`).
    public var tokenRequests: [String: Int] = [:]
    /// Access tokens issued by service account.
    public var tokensIssued: [String: Int] = [:]
    /// Messages sent to an open message stream.
    public var delivered = 0
    /// Messages kept for a device that could not take them.
    public var stored = 0
    /// Collapsible messages held back by the throttle.
    public var throttled = 0
    /// Messages replaced by a newer one with the same collapse key.
    public var collapsed = 0
    /// Messages whose TTL passed before delivery.
    public var expired = 0
    /// Messages accepted and never delivered.
    public var dropped = 0
    /// Installed devices.
    public var registeredDevices = 0
    /// Open message streams.
    public var eventStreams = 0

    /// Creates zeroed counters.
    public init() {}

    /// The total number of `messages:send` requests answered.
    public var sendRequests: Int { responses.values.reduce(0, +) }

    /// The counters in the Prometheus text exposition format.
    public var prometheusText: String {
        var page = PrometheusText()
        page.family(
            "fcm_sim_send_requests_total", .counter, help: "messages:send requests by response status and errorCode.")
        for (key, count) in responses.sorted(by: {
            ($0.key.status, $0.key.errorCode) < ($1.key.status, $1.key.errorCode)
        }) {
            page.sample(
                "fcm_sim_send_requests_total", labels: ["status": String(key.status), "error_code": key.errorCode],
                Double(count))
        }
        page.family("fcm_sim_token_requests_total", .counter, help: "Token requests by service account.")
        for (email, count) in tokenRequests.sorted(by: { $0.key < $1.key }) {
            page.sample("fcm_sim_token_requests_total", labels: ["client_email": email], Double(count))
        }
        page.family("fcm_sim_tokens_issued_total", .counter, help: "Access tokens issued by service account.")
        for (email, count) in tokensIssued.sorted(by: { $0.key < $1.key }) {
            page.sample("fcm_sim_tokens_issued_total", labels: ["client_email": email], Double(count))
        }
        for (name, kind, help, value) in [
            (
                "fcm_sim_messages_delivered_total", PrometheusText.Kind.counter, "Messages sent to a message stream.",
                delivered
            ),
            ("fcm_sim_messages_stored_total", .counter, "Messages kept for an unreachable device.", stored),
            ("fcm_sim_messages_throttled_total", .counter, "Collapsible messages held back.", throttled),
            ("fcm_sim_messages_collapsed_total", .counter, "Messages replaced by a newer one.", collapsed),
            ("fcm_sim_messages_expired_total", .counter, "Messages expired before delivery.", expired),
            ("fcm_sim_messages_dropped_total", .counter, "Messages accepted and never delivered.", dropped),
            ("fcm_sim_registered_devices", .gauge, "Installed devices.", registeredDevices),
            ("fcm_sim_event_streams", .gauge, "Open message streams.", eventStreams),
        ] {
            page.single(name, kind, help: help, Double(value))
        }
        return page.text
    }
}
