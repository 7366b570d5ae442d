import HTTPServer
import SimulatorSupport

/// The failures apns-sim injects on purpose: the faults every simulator shares (a drop, a 429, a 503, latency)
/// and one of APNs's own, a GOAWAY after some streams on a connection.
public struct APNsFaults: Sendable, Equatable {
    /// The faults every simulator injects alike (429 is `TooManyRequests`, 503 `ServiceUnavailable` here).
    public var common: SimulatorFaults
    /// Send GOAWAY on a connection after this many streams; `nil` for never.
    public var goAwayAfterStreams: Int?

    /// Creates faults; the default injects nothing.
    public init(_ common: SimulatorFaults = SimulatorFaults(), goAwayAfterStreams: Int? = nil) {
        self.common = common
        self.goAwayAfterStreams = goAwayAfterStreams
    }
}

/// Decides faults from a seeded generator: one draw per valid request, so a seed replays exactly.
public struct APNsFaultInjector: Sendable {
    /// The faults in force.
    public let configuration: APNsFaults
    private var generator: SeededGenerator
    private var streamsByConnection: [UInt64: Int] = [:]

    /// Creates an injector for `configuration`.
    public init(configuration: APNsFaults) {
        self.configuration = configuration
        generator = SeededGenerator(seed: configuration.common.seed)
    }

    /// Draws the fault for the next valid request.
    public mutating func nextDecision() -> SimulatorFaults.Draw {
        configuration.common.draw(using: &generator)
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

/// `PUT /sim/faults`: the fields every simulator shares (``SimulatorFaultsJSON``) and `goawayAfter`, each
/// optional, an absent one meaning no such fault; answers show every field.
package struct APNsFaultsJSON: SimulatorFaultsForm {
    package static let fields = SimulatorFaultsJSON.fields.union(["goawayAfter"])
    var common: SimulatorFaultsJSON
    var goawayAfter: Int?

    private enum CodingKeys: String, CodingKey {
        case goawayAfter
    }

    package init(_ faults: APNsFaults) {
        common = SimulatorFaultsJSON(faults.common)
        goawayAfter = faults.goAwayAfterStreams ?? 0
    }

    package init(from decoder: any Decoder) throws {
        common = try SimulatorFaultsJSON(from: decoder)
        goawayAfter = try decoder.container(keyedBy: CodingKeys.self).decodeIfPresent(
            Int.self, forKey: .goawayAfter)
    }

    package func encode(to encoder: any Encoder) throws {
        try common.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(goawayAfter ?? 0, forKey: .goawayAfter)
    }

    package func faults() throws(HTTPError) -> APNsFaults {
        let common = try common.faults()
        if let goawayAfter, goawayAfter < 0 {
            throw .invalidRequest("'goawayAfter' must be 0 (never) or a positive number of streams.")
        }
        return APNsFaults(common, goAwayAfterStreams: (goawayAfter ?? 0) > 0 ? goawayAfter : nil)
    }
}
