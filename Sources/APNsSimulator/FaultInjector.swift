import SimulatorSupport

/// Failures the gateway injects on purpose, so providers can be tested against a misbehaving APNs.
public struct FaultConfiguration: Sendable, Equatable {
    /// Probability (0…1) that an accepted notification is answered 200 and then never delivered.
    public var dropProbability: Double
    /// Probability (0…1) that a valid request is answered 429 `TooManyRequests`.
    public var tooManyRequestsProbability: Double
    /// Probability (0…1) that a valid request is answered 503 `ServiceUnavailable`.
    public var serviceUnavailableProbability: Double
    /// Seed of the random generator; the same seed and the same requests give the same faults.
    /// `nil` picks a random seed.
    public var seed: UInt64?
    /// Send GOAWAY on a connection after this many streams; `nil` for never.
    public var goAwayAfterStreams: Int?
    /// Extra time before every provider response.
    public var latency: Duration

    /// Creates a fault configuration; the default injects nothing.
    public init(
        dropProbability: Double = 0, tooManyRequestsProbability: Double = 0, serviceUnavailableProbability: Double = 0,
        seed: UInt64? = nil, goAwayAfterStreams: Int? = nil, latency: Duration = .zero
    ) {
        self.dropProbability = dropProbability
        self.tooManyRequestsProbability = tooManyRequestsProbability
        self.serviceUnavailableProbability = serviceUnavailableProbability
        self.seed = seed
        self.goAwayAfterStreams = goAwayAfterStreams
        self.latency = latency
    }
}

/// What the fault injector decided for one valid request.
public enum FaultDecision: Sendable, Equatable {
    /// Handle the request normally.
    case none
    /// Answer 200 but never deliver.
    case drop
    /// Answer 429 `TooManyRequests`.
    case tooManyRequests
    /// Answer 503 `ServiceUnavailable`.
    case serviceUnavailable
}

/// Decides faults from a seeded generator: one draw per valid request, so a seed replays exactly.
public struct FaultInjector: Sendable {
    /// The configuration in use.
    public let configuration: FaultConfiguration
    private var generator: SeededGenerator
    private var streamsByConnection: [UInt64: Int] = [:]

    /// Creates an injector for `configuration`.
    public init(configuration: FaultConfiguration) {
        self.configuration = configuration
        generator = SeededGenerator(seed: configuration.seed)
    }

    /// Whether any probabilistic fault is configured.
    public var isActive: Bool {
        configuration.dropProbability > 0 || configuration.tooManyRequestsProbability > 0
            || configuration.serviceUnavailableProbability > 0
    }

    /// Draws the fault for the next valid request.
    public mutating func nextDecision() -> FaultDecision {
        guard isActive else { return .none }
        let draw = generator.nextUnit()
        var threshold = configuration.serviceUnavailableProbability
        if draw < threshold { return .serviceUnavailable }
        threshold += configuration.tooManyRequestsProbability
        if draw < threshold { return .tooManyRequests }
        threshold += configuration.dropProbability
        if draw < threshold { return .drop }
        return .none
    }

    /// Counts a stream on `connectionID`; `true` when this stream is the one after which GOAWAY is due.
    public mutating func countStream(on connectionID: UInt64) -> Bool {
        guard let limit = configuration.goAwayAfterStreams, limit > 0 else { return false }
        if streamsByConnection.count > 100_000 { streamsByConnection.removeAll() }
        let count = streamsByConnection[connectionID, default: 0] + 1
        if count >= limit {
            streamsByConnection[connectionID] = nil
            return true
        }
        streamsByConnection[connectionID] = count
        return false
    }
}
