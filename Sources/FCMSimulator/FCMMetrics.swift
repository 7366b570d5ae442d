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
        var lines: [String] = []
        func header(_ name: String, _ kind: String, _ help: String) {
            lines.append("# HELP \(name) \(help)")
            lines.append("# TYPE \(name) \(kind)")
        }
        func gauge(_ name: String, _ kind: String, _ help: String, _ value: Int) {
            header(name, kind, help)
            lines.append("\(name) \(value)")
        }
        header("fcm_sim_send_requests_total", "counter", "messages:send requests by response status and errorCode.")
        for (key, count) in responses.sorted(by: {
            ($0.key.status, $0.key.errorCode) < ($1.key.status, $1.key.errorCode)
        }) {
            lines.append(
                #"fcm_sim_send_requests_total{status="\#(key.status)",error_code="\#(key.errorCode)"} \#(count)"#)
        }
        header("fcm_sim_token_requests_total", "counter", "Token requests by service account.")
        for (email, count) in tokenRequests.sorted(by: { $0.key < $1.key }) {
            lines.append(#"fcm_sim_token_requests_total{client_email="\#(escape(email))"} \#(count)"#)
        }
        header("fcm_sim_tokens_issued_total", "counter", "Access tokens issued by service account.")
        for (email, count) in tokensIssued.sorted(by: { $0.key < $1.key }) {
            lines.append(#"fcm_sim_tokens_issued_total{client_email="\#(escape(email))"} \#(count)"#)
        }
        gauge("fcm_sim_messages_delivered_total", "counter", "Messages sent to a message stream.", delivered)
        gauge("fcm_sim_messages_stored_total", "counter", "Messages kept for an unreachable device.", stored)
        gauge("fcm_sim_messages_throttled_total", "counter", "Collapsible messages held back.", throttled)
        gauge("fcm_sim_messages_collapsed_total", "counter", "Messages replaced by a newer one.", collapsed)
        gauge("fcm_sim_messages_expired_total", "counter", "Messages expired before delivery.", expired)
        gauge("fcm_sim_messages_dropped_total", "counter", "Messages accepted and never delivered.", dropped)
        gauge("fcm_sim_registered_devices", "gauge", "Installed devices.", registeredDevices)
        gauge("fcm_sim_event_streams", "gauge", "Open message streams.", eventStreams)
        return lines.joined(separator: "\n") + "\n"
    }

    private func escape(_ label: String) -> String {
        label.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }
}
