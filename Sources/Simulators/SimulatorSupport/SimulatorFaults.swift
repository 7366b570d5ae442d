import Durations
import HTTPServer

/// Failures a simulator injects on purpose into valid provider requests, so senders can be tested against a
/// misbehaving push service: an accepted message that is never delivered, a 429, a 503, extra latency.
public struct SimulatorFaults: Sendable, Equatable {
    /// Probability (0…1) that a valid request is accepted and its message never delivered.
    public var dropProbability: Double
    /// Probability (0…1) that a valid request is answered 429.
    public var status429Probability: Double
    /// Probability (0…1) that a valid request is answered 503.
    public var status503Probability: Double
    /// Extra time before every provider response.
    public var latency: Duration
    /// Seed of the fault generator (same seed and requests, same faults); `nil` picks one.
    public var seed: UInt64?

    /// Creates faults; the default injects nothing.
    public init(
        dropProbability: Double = 0, status429Probability: Double = 0, status503Probability: Double = 0,
        latency: Duration = .zero, seed: UInt64? = nil
    ) {
        self.dropProbability = dropProbability
        self.status429Probability = status429Probability
        self.status503Probability = status503Probability
        self.latency = latency
        self.seed = seed
    }

    /// What one draw decided for a request.
    public enum Draw: Sendable, Equatable {
        /// No fault: handle the request.
        case none
        /// Accept it and deliver nothing.
        case drop
        /// Answer 429.
        case status429
        /// Answer 503.
        case status503
    }

    /// Draws the fault for one request from `generator` (no draw when every probability is zero, so adding
    /// faults later does not shift a seeded sequence).
    public func draw(using generator: inout SeededGenerator) -> Draw {
        guard dropProbability + status429Probability + status503Probability > 0 else { return .none }
        let draw = generator.nextUnit()
        var threshold = status503Probability
        if draw < threshold { return .status503 }
        threshold += status429Probability
        if draw < threshold { return .status429 }
        threshold += dropProbability
        return draw < threshold ? .drop : .none
    }
}

/// The body of `PUT /sim/faults` and `GET /sim/faults`: every field optional, an absent one meaning no such
/// fault; answers show every field (`seed` as `null` when none was set).
public struct SimulatorFaultsJSON: Codable, Sendable {
    /// The fields the request may hold.
    public static let fields: Set<String> = ["drop", "status429", "status503", "latencyMs", "seed"]
    /// See ``SimulatorFaults/dropProbability``.
    public var drop: Double?
    /// See ``SimulatorFaults/status429Probability``.
    public var status429: Double?
    /// See ``SimulatorFaults/status503Probability``.
    public var status503: Double?
    /// See ``SimulatorFaults/latency``, in milliseconds.
    public var latencyMs: Int?
    /// See ``SimulatorFaults/seed``.
    public var seed: UInt64?

    /// The JSON form of `faults`.
    public init(_ faults: SimulatorFaults) {
        drop = faults.dropProbability
        status429 = faults.status429Probability
        status503 = faults.status503Probability
        latencyMs = Int(faults.latency.wholeMilliseconds)
        seed = faults.seed
    }

    /// Encodes every field, `seed` as `null` when none was set.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(drop ?? 0, forKey: .drop)
        try container.encode(status429 ?? 0, forKey: .status429)
        try container.encode(status503 ?? 0, forKey: .status503)
        try container.encode(latencyMs ?? 0, forKey: .latencyMs)
        try container.encode(seed, forKey: .seed)
    }

    /// The checked faults (a 400 naming the field otherwise).
    public func faults() throws(HTTPError) -> SimulatorFaults {
        try FaultRequest.check(drop: drop, status429: status429, status503: status503, latencyMs: latencyMs)
        return SimulatorFaults(
            dropProbability: drop ?? 0, status429Probability: status429 ?? 0, status503Probability: status503 ?? 0,
            latency: .milliseconds(latencyMs ?? 0), seed: seed)
    }
}
