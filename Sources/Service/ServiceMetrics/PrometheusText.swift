/// The Prometheus text exposition format, written one family at a time: the one writer behind every `/metrics`
/// page (mailboxd's registry and each simulator's counters). Label values are escaped here and nowhere else.
public struct PrometheusText: Sendable {
    /// A metric family's type.
    public enum Kind: String, Sendable {
        case counter
        case gauge
        case histogram
    }

    private var output = ""

    /// An empty page.
    public init() {}

    /// The page written so far.
    public var text: String { output }

    /// Starts a family: its `# HELP` and `# TYPE` lines.
    public mutating func family(_ name: String, _ kind: Kind, help: String) {
        output += "# HELP \(name) \(help)\n# TYPE \(name) \(kind.rawValue)\n"
    }

    /// One sample, `name{label="value",…} value`, its label values escaped.
    public mutating func sample(_ name: String, labels: KeyValuePairs<String, String> = [:], _ value: Double) {
        sample(name, labelText: labels.map { "\($0.key)=\"\(Self.escape($0.value))\"" }.joined(separator: ","), value)
    }

    /// One sample whose labels are already written (`route="/v1",status="200"`, values escaped).
    public mutating func sample(_ name: String, labelText: String, _ value: Double) {
        output +=
            labelText.isEmpty ? "\(name) \(Self.format(value))\n" : "\(name){\(labelText)} \(Self.format(value))\n"
    }

    /// A family of one unlabelled sample.
    public mutating func single(_ name: String, _ kind: Kind, help: String, _ value: Double) {
        family(name, kind, help: help)
        sample(name, value)
    }

    /// `value` as a Prometheus label value (the text between the quotes): backslash, quote and newline escaped.
    public static func escape(_ value: String) -> String {
        guard value.contains(where: { $0 == "\\" || $0 == "\"" || $0 == "\n" }) else { return value }
        return value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }

    /// A sample value: whole numbers without a fraction, others as Swift prints them.
    public static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}
