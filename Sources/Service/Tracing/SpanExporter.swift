import Foundation
import HTTPClient
import Locking
import ServiceMetrics

/// Sends spans to an OpenTelemetry collector over OTLP/HTTP, in batches, from a task of its own. Whoever makes a
/// span never waits: the queue is bounded, and a span that finds it full is dropped and counted
/// (`mailboxd_trace_spans_dropped_total{reason="queueFull"}`), as is a batch the collector refuses or cannot be
/// reached for — tracing never slows or fails a delivery.
public final class SpanExporter: Sendable {
    /// Where and how spans are sent.
    public struct Configuration: Sendable {
        /// The collector's URL (`--otlp-endpoint`), with `/v1/traces` appended when it has no path.
        public var endpoint: String
        /// The resource's `service.name` (`--otlp-service-name`).
        public var serviceName = "mailboxd"
        /// The resource's `service.instance.id` (`--instance-id`).
        public var instanceID = ""
        /// Spans queued at most while they wait to be taken for sending (what was taken and is being sent, and the
        /// tracer's held commits, are out of the queue).
        public var queueCapacity = 8_192
        /// Spans sent in one request at most.
        public var batchSize = 512
        /// How long the exporter waits between batches that were not full.
        public var interval: Duration = .milliseconds(500)
        /// The time one request may take.
        public var timeout: Duration = .seconds(5)
        /// A CA file for an `https` collector whose certificate the system's CAs do not vouch for.
        public var caFile: String?

        /// Sends to `endpoint` (see ``endpoint(_:)``).
        public init(endpoint: String) { self.endpoint = endpoint }
    }

    /// The export URL for `given`: `http` or `https` with a host, and `/v1/traces` when it has no path (OTLP/HTTP's
    /// rule); throws a message naming what is wrong.
    public static func endpoint(_ given: String) throws(TracingConfigurationError) -> String {
        guard let url = URLComponents(string: given), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = url.host, !host.isEmpty, url.user == nil,
            url.password == nil, url.query == nil, url.fragment == nil
        else {
            throw TracingConfigurationError(
                "--otlp-endpoint must be an http:// or https:// URL with a host and no credentials, query or fragment")
        }
        return url.path.isEmpty || url.path == "/" ? given.trimmingSuffix("/") + "/v1/traces" : given
    }

    private struct Queue {
        var spans: [Span] = []
        var dropped = 0
    }

    private let configuration: Configuration
    private let metrics: Metrics
    private let log: @Sendable (String) -> Void
    private let client: HTTPClient
    private let queue = LockedValue(Queue())
    private let failing = LockedValue(false)
    private let loop = LockedValue<Task<Void, Never>?>(nil)

    /// An exporter to `configuration.endpoint` (already checked by ``endpoint(_:)``); ``start(before:)`` runs it.
    public init(configuration: Configuration, metrics: Metrics, log: @escaping @Sendable (String) -> Void) {
        self.configuration = configuration
        self.metrics = metrics
        self.log = log
        client = HTTPClient(
            configuration: .init(
                httpVersion: .http1, tls: .init(caFile: configuration.caFile), connectTimeout: .seconds(2),
                requestTimeout: configuration.timeout, maximumConnectionsPerHost: 2,
                userAgent: "SignalFetch-mailboxd-otlp/1"))
    }

    /// Starts sending; `before(final)` is asked once an interval, and when stopping (`final`: nothing may be held
    /// any longer), for the spans its caller held back (the tracer's commits, held for their arrivals). Those are
    /// sent as they are, outside the queue's bound: holding them was already bounded by the interval.
    public func start(before: @escaping @Sendable (_ final: Bool) -> [Span]) {
        loop.withLock { task in
            guard task == nil else { return }
            task = Task { await self.run(before: before) }
        }
    }

    /// Sends what is queued, then stops.
    public func shutdown() async {
        let task = loop.withLock { $0 }
        task?.cancel()
        await task?.value
        client.shutdown()
    }

    /// Queues `spans`; those past the queue's capacity are dropped and counted.
    public func export(_ spans: [Span]) {
        guard !spans.isEmpty else { return }
        let dropped = queue.withLock { queue -> Int in
            let room = max(0, configuration.queueCapacity - queue.spans.count)
            queue.spans.append(contentsOf: spans.prefix(room))
            return spans.count - min(room, spans.count)
        }
        if dropped > 0 { countDropped(dropped, reason: "queueFull") }
    }

    /// Counts spans that were not sent.
    func countDropped(_ count: Int, reason: String) {
        metrics.increment(
            "mailboxd_trace_spans_dropped_total", labels: "reason=\"\(reason)\"", by: Double(count),
            help: "Spans not exported: the queue was full, the collector refused or could not be reached, or a "
                + "span failed the content guard.")
    }

    /// Once an interval (and when stopping), the held spans are taken (`before`) and sent with everything queued, in
    /// batches; the queue is taken whole and sent from there, so no batch shifts the spans behind it. A full batch
    /// queued meanwhile is taken at once; the held spans are asked for once an interval however many batches go.
    private func run(before: @escaping @Sendable (Bool) -> [Span]) async {
        let clock = ContinuousClock()
        var released = clock.now
        var backlog: ArraySlice<Span> = []
        while true {
            let stopping = Task.isCancelled
            if stopping || released.duration(to: clock.now) >= configuration.interval {
                backlog.append(contentsOf: before(stopping))
                released = clock.now
            }
            if backlog.isEmpty { backlog = takeQueued()[...] }
            let batch = Array(backlog.prefix(configuration.batchSize))
            backlog = backlog.dropFirst(batch.count)
            if !batch.isEmpty, let failure = await send(batch), stopping {
                // A collector that fails a batch at the stop is not waited for again: what is left is counted.
                let left = backlog.count + takeQueued().count
                if left > 0 { countDropped(left, reason: failure) }
                return
            }
            if backlog.isEmpty {
                // Stopping: done once the queue, looked at again after the tracer's last spans, is empty.
                if stopping {
                    if batch.isEmpty { return } else { continue }
                }
                // A full batch waiting is taken at once (the queue stays short under load); less waits for the next
                // interval.
                if queue.withLock({ $0.spans.count }) < configuration.batchSize {
                    try? await Task.sleep(until: released.advanced(by: configuration.interval), clock: clock)
                }
            }
        }
    }

    /// Everything queued, leaving the queue empty.
    private func takeQueued() -> [Span] {
        queue.withLock { queue in
            defer { queue.spans = [] }
            return queue.spans
        }
    }

    /// Sends `batch`; `nil` when the collector took it, else the reason its spans were counted dropped.
    private func send(_ batch: [Span]) async -> String? {
        let body = OTLPJSON.request(batch, service: configuration.serviceName, instance: configuration.instanceID)
        let outcome: String?
        let request = HTTPClient.Request(
            method: .post, url: configuration.endpoint, headers: ["Content-Type": "application/json"],
            body: Data(body))
        do {
            // In a task of its own: the batches sent while stopping are sent from the cancelled loop, and a request
            // made in a cancelled task is aborted before it leaves. The request's timeout bounds the wait.
            let response = try await Task { [client] in try await client.execute(request) }.value
            outcome = (200..<300).contains(response.status) ? nil : "the collector answered \(response.status)"
        } catch {
            outcome = "the collector cannot be reached (\(error))"
        }
        if let outcome {
            let reason = outcome.hasPrefix("the collector answered") ? "refused" : "unreachable"
            countDropped(batch.count, reason: reason)
            if !failing.withLock({ state in
                defer { state = true }; return state
            }) {
                log("tracing: spans dropped: \(outcome); counted in mailboxd_trace_spans_dropped_total until it takes")
            }
            return reason
        } else {
            metrics.increment(
                "mailboxd_trace_spans_exported_total", by: Double(batch.count),
                help: "Spans the OTLP collector accepted.")
            if failing.withLock({ state in
                defer { state = false }; return state
            }) {
                log("tracing: the collector takes spans again")
            }
            return nil
        }
    }
}

/// A tracing flag that cannot be used, with the reason.
public struct TracingConfigurationError: Error, CustomStringConvertible {
    /// What is wrong.
    public let description: String

    init(_ description: String) { self.description = description }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}
