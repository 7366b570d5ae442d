/// Why a simulator's server could not start.
public enum SimulatorError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The provider API (HTTP/2) could not start.
    case providerStartFailed(String)
    /// The device API (HTTP/1.1) could not start.
    case deviceStartFailed(String)
    /// Another listener of the simulator (e.g. webpush-sim's WebSocket push protocol) could not start.
    case listenerStartFailed(String)

    /// A one-line explanation.
    public var description: String {
        switch self {
        case .providerStartFailed(let reason): return "provider API: \(reason)"
        case .deviceStartFailed(let reason): return "device API: \(reason)"
        case .listenerStartFailed(let reason): return reason
        }
    }
}
