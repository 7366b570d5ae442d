import Foundation

/// One figure row of the bench report, in the shape every benchmark prints (`Scripts/signalfetch/report.py` reads
/// it): ours against a baseline measured in the same run, their ratio and the goal it is held to, and any details
/// (the measurements behind it, which the report's findings read when a goal is missed).
struct Figure {
    /// A detail's value.
    enum Detail {
        case integer(Int)
        case number(Double, decimals: Int)
        case text(String)

        var json: Any {
            switch self {
            case .integer(let value): value
            case .number(let value, let decimals): rounded(value, decimals)
            case .text(let value): value
            }
        }
    }

    var benchmark: String
    var title: String
    var unit: String
    var ours: (label: String, value: Double)
    var baseline: (label: String, value: Double)
    /// `ours ÷ baseline` unless given (a latency figure compares rates, the inverse).
    var ratio: Double
    var goal: Double
    var higherIsBetter = true
    /// Whether the throughput chart shows it.
    var chart = true
    var details: [String: Detail] = [:]

    init(
        _ benchmark: String, title: String, unit: String, ours: (String, Double), baseline: (String, Double),
        ratio: Double? = nil, goal: Double, higherIsBetter: Bool = true, chart: Bool = true,
        details: [String: Detail] = [:]
    ) {
        self.benchmark = benchmark
        self.title = title
        self.unit = unit
        self.ours = ours
        self.baseline = baseline
        self.ratio = ratio ?? (baseline.1 == 0 ? 0 : ours.1 / baseline.1)
        self.goal = goal
        self.higherIsBetter = higherIsBetter
        self.chart = chart
        self.details = details
    }

    var met: Bool { higherIsBetter ? ratio >= goal : ratio <= goal }

    /// The row as one line of JSON (keys sorted).
    var json: String {
        var object: [String: Any] = [
            "benchmark": benchmark, "title": title, "unit": unit, "ours_label": ours.label,
            "ours": rounded(ours.value, 3), "baseline_label": baseline.label, "baseline": rounded(baseline.value, 3),
            "ratio": rounded(ratio, 3), "goal": goal, "goal_op": higherIsBetter ? ">=" : "<=", "met": met,
        ]
        if !chart { object["chart"] = false }
        for (key, detail) in details { object[key] = detail.json }
        let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data ?? Data("{}".utf8), as: UTF8.self)
    }
}

private func rounded(_ value: Double, _ decimals: Int) -> Double {
    let scale = pow(10, Double(decimals))
    return (value * scale).rounded() / scale
}
