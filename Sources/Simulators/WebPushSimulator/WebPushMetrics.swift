import ServiceMetrics

/// Counters describing what a ``WebPushGateway`` has done, renderable as Prometheus text.
public struct WebPushMetrics: Sendable, Equatable {
    /// Push requests answered, by status.
    public var responses: [Int: Int] = [:]
    /// Messages handed to a listener.
    public var delivered = 0
    /// Mozilla-protocol notifications acknowledged.
    public var acknowledged = 0
    /// Messages kept for an unreachable subscription.
    public var stored = 0
    /// Kept messages replaced by a newer one with the same `Topic`.
    public var replaced = 0
    /// Messages whose TTL passed before delivery.
    public var expired = 0
    /// Messages accepted and never delivered.
    public var dropped = 0
    /// Messages accepted that do not decrypt (or whose layout is wrong).
    public var undecryptable = 0
    /// Mozilla-protocol notifications the browser's service worker failed on (nacks).
    public var clientErrors = 0
    /// Live subscriptions.
    public var subscriptions = 0
    /// Open message streams.
    public var eventStreams = 0
    /// Open Mozilla-protocol sockets that said hello.
    public var mozillaConnections = 0

    /// Creates zeroed counters.
    public init() {}

    /// Every push request answered.
    public var pushRequests: Int { responses.values.reduce(0, +) }

    /// The counters in the Prometheus text exposition format.
    public var prometheusText: String {
        var page = PrometheusText()
        page.family("webpush_sim_push_requests_total", .counter, help: "Push requests by response status.")
        for (status, count) in responses.sorted(by: { $0.key < $1.key }) {
            page.sample("webpush_sim_push_requests_total", labels: ["status": String(status)], Double(count))
        }
        for (name, kind, help, value) in [
            (
                "webpush_sim_messages_delivered_total", PrometheusText.Kind.counter, "Messages handed to a listener.",
                delivered
            ),
            (
                "webpush_sim_messages_acknowledged_total", .counter, "Mozilla-protocol notifications acknowledged.",
                acknowledged
            ),
            ("webpush_sim_messages_stored_total", .counter, "Messages kept for an unreachable subscription.", stored),
            ("webpush_sim_messages_replaced_total", .counter, "Kept messages replaced by a newer Topic.", replaced),
            ("webpush_sim_messages_expired_total", .counter, "Messages expired before delivery.", expired),
            ("webpush_sim_messages_dropped_total", .counter, "Messages accepted and never delivered.", dropped),
            (
                "webpush_sim_messages_undecryptable_total", .counter, "Messages accepted that do not decrypt.",
                undecryptable
            ),
            (
                "webpush_sim_messages_client_errors_total", .counter, "Notifications a service worker failed on.",
                clientErrors
            ),
            ("webpush_sim_subscriptions", .gauge, "Live subscriptions.", subscriptions),
            ("webpush_sim_event_streams", .gauge, "Open message streams.", eventStreams),
            ("webpush_sim_mozilla_connections", .gauge, "Mozilla-protocol sockets after hello.", mozillaConnections),
        ] {
            page.single(name, kind, help: help, Double(value))
        }
        return page.text
    }
}
