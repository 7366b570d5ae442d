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
