import Foundation
import Locking

/// Counters and latency histograms, rendered in the Prometheus text format.
public final class Metrics: Sendable {
    private struct Histogram {
        var buckets: [Int]
        var count = 0
        var sum = 0.0
    }

    private struct State {
        var counters: [String: [String: Double]] = [:]
        var histograms: [String: [String: Histogram]] = [:]
        var help: [String: (type: String, text: String)] = [:]
    }

    /// Histogram bucket bounds, in seconds.
    static let bounds: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]

    private let state = LockedValue(State())

    /// An empty registry.
    public init() {}

    /// Adds `value` to the counter `name` with `labels` (for example `route="/v1/changes",status="200"`).
    public func increment(_ name: String, labels: String = "", by value: Double = 1, help: String = "") {
        state.withLock { s in
            s.counters[name, default: [:]][labels, default: 0] += value
            if s.help[name] == nil { s.help[name] = ("counter", help) }
        }
    }

    /// Sets the counter `name` to `total`, a running total kept elsewhere (for example by the store).
    public func setTotal(_ name: String, labels: String = "", to total: Double, help: String = "") {
        assign(name, labels: labels, value: total, type: "counter", help: help)
    }

    /// Sets the gauge `name` to `value`.
    public func set(_ name: String, labels: String = "", to value: Double, help: String = "") {
        assign(name, labels: labels, value: value, type: "gauge", help: help)
    }

    private func assign(_ name: String, labels: String, value: Double, type: String, help: String) {
        state.withLock { s in
            s.counters[name, default: [:]][labels] = value
            if s.help[name] == nil { s.help[name] = (type, help) }
        }
    }

    /// Records one observation of `seconds` in the histogram `name`.
    public func observe(_ name: String, labels: String = "", seconds: Double, help: String = "") {
        state.withLock { s in
            var histogram = s.histograms[name, default: [:]][labels] ?? Histogram(buckets: Self.bounds.map { _ in 0 })
            for (index, bound) in Self.bounds.enumerated() where seconds <= bound { histogram.buckets[index] += 1 }
            histogram.count += 1
            histogram.sum += seconds
            s.histograms[name, default: [:]][labels] = histogram
            if s.help[name] == nil { s.help[name] = ("histogram", help) }
        }
    }

    /// The current value of a counter or gauge (0 when never set).
    public func value(_ name: String, labels: String = "") -> Double {
        state.withLock { $0.counters[name]?[labels] ?? 0 }
    }

    /// The registry in the Prometheus text exposition format.
    public func render() -> String {
        state.withLock { s in
            var page = PrometheusText()
            for name in s.counters.keys.sorted() {
                let meta = s.help[name] ?? ("counter", "")
                page.family(name, PrometheusText.Kind(rawValue: meta.type) ?? .counter, help: meta.text)
                for (labels, value) in s.counters[name]!.sorted(by: { $0.key < $1.key }) {
                    page.sample(name, labelText: labels, value)
                }
            }
            for name in s.histograms.keys.sorted() {
                page.family(name, .histogram, help: s.help[name]?.text ?? "")
                for (labels, histogram) in s.histograms[name]!.sorted(by: { $0.key < $1.key }) {
                    let prefix = labels.isEmpty ? "" : labels + ","
                    for (index, bound) in Self.bounds.enumerated() {
                        page.sample(
                            name + "_bucket", labelText: "\(prefix)le=\"\(bound)\"", Double(histogram.buckets[index]))
                    }
                    page.sample(name + "_bucket", labelText: "\(prefix)le=\"+Inf\"", Double(histogram.count))
                    page.sample(name + "_sum", labelText: labels, histogram.sum)
                    page.sample(name + "_count", labelText: labels, Double(histogram.count))
                }
            }
            return page.text
        }
    }
}
