import HTTPServer
import Locking

/// What the shared control routes (`Router.addControlRoutes(for:)`) ask of every simulator's gateway, apns-sim's
/// included: its faults in the JSON form of `/sim/faults`, the capture log and the counters.
package protocol SimulatorControl: Sendable {
    /// One capture-log entry as `GET /sim/log` lists it.
    associatedtype LogEntry: Encodable & SendableMetatype
    /// The faults' form in `GET` and `PUT /sim/faults`.
    associatedtype FaultsForm: SimulatorFaultsForm

    /// The faults in force.
    var faults: FaultsForm.Faults { get }
    /// Replaces the faults in force.
    func setFaults(_ faults: FaultsForm.Faults)
    /// Capture-log entries after sequence `after`, oldest first, at most `limit`.
    func logEntries(after: Int, limit: Int) -> [LogEntry]
    /// Forgets the capture log; numbering goes on.
    func clearLog()
    /// The counters as Prometheus text (`GET /metrics`).
    var prometheusText: String { get }
}

/// A simulator's faults as `GET` and `PUT /sim/faults` carry them: every field optional, checked into the faults
/// (a 400 naming the field otherwise).
package protocol SimulatorFaultsForm: Codable, Sendable {
    /// The faults this form describes.
    associatedtype Faults: Sendable
    /// The fields a request may hold.
    static var fields: Set<String> { get }
    /// The form of `faults`.
    init(_ faults: Faults)
    /// The checked faults.
    func faults() throws(HTTPError) -> Faults
}

extension SimulatorFaultsJSON: SimulatorFaultsForm {}

/// What ``SimulatorListeners`` asks of fcm-sim's and webpush-sim's gateway besides the control routes: answering
/// provider requests, delayed work and device streams. Their faults are the ones every simulator shares.
package protocol SimulatorGateway: SimulatorControl where FaultsForm == SimulatorFaultsJSON {
    /// Answers one provider request, for either transport of the provider listener.
    func handle(_ request: SimulatorProviderRequest) -> SimulatorProviderResponse
    /// Does the delayed work that is due (the ticker calls it).
    func processDueWork()
    /// Closes every device stream (for shutdown).
    func closeAllStreams()
}

/// What every simulator gateway's locked state keeps for the control API: the faults in force with their seeded
/// sequence, and the capture log. The gateways' control methods are the ``LockedValue`` extension below.
package protocol SimulatorControlState: Sendable {
    /// One capture-log entry.
    associatedtype Entry: CaptureLogEntry
    /// The faults in force.
    var faults: SimulatorFaults { get set }
    /// The sequence the faults are drawn from.
    var generator: SeededGenerator { get set }
    /// The capture log.
    var log: CaptureLog<Entry> { get set }
}

extension LockedValue where Value: SimulatorControlState {
    /// The faults in force.
    package var faults: SimulatorFaults { withLock { $0.faults } }

    /// Replaces the faults in force; a new seed restarts the sequence.
    package func setFaults(_ faults: SimulatorFaults) {
        withLock { state in
            state.faults = faults
            state.generator = SeededGenerator(seed: faults.seed)
        }
    }

    /// Forgets the capture log; numbering goes on.
    package func clearLog() { withLock { $0.log.clear() } }

    /// Capture-log entries after sequence `after`, oldest first, at most `limit`.
    package func logEntries(after: Int, limit: Int) -> [Value.Entry] {
        withLock { $0.log.entries(after: after, limit: limit) }
    }
}
