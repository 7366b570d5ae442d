import Locking

/// What ``SimulatorListeners`` and the shared control routes (`Router.addControlRoutes(for:)`) ask
/// of fcm-sim's and webpush-sim's gateway: answering provider requests, delayed work, device streams, faults, the
/// capture log and the counters.
package protocol SimulatorGateway: Sendable {
    /// One capture-log entry as `GET /sim/log` lists it.
    associatedtype LogEntry: Encodable & SendableMetatype

    /// Answers one provider request, for either transport of the provider listener.
    func handle(_ request: SimulatorProviderRequest) -> SimulatorProviderResponse
    /// Does the delayed work that is due (the ticker calls it).
    func processDueWork()
    /// Closes every device stream (for shutdown).
    func closeAllStreams()
    /// The faults in force.
    var faults: SimulatorFaults { get }
    /// Replaces the faults in force.
    func setFaults(_ faults: SimulatorFaults)
    /// Capture-log entries after sequence `after`, oldest first, at most `limit`.
    func logEntries(after: Int, limit: Int) -> [LogEntry]
    /// Forgets the capture log; numbering goes on.
    func clearLog()
    /// The counters as Prometheus text (`GET /metrics`).
    var prometheusText: String { get }
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
