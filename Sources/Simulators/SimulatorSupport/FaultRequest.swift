import Durations
import HTTPServer

/// The checks both simulators' `PUT /sim/faults` make of the fields they share: `drop`, `status429` and
/// `status503` are probabilities that add up to at most 1; `latencyMs` is 0 to 60,000. A mistake is a 400 naming
/// the field.
public enum FaultRequest {
    /// Checks the shared fields (absent ones are zero).
    public static func check(drop: Double?, status429: Double?, status503: Double?, latencyMs: Int?) throws(HTTPError) {
        let probabilities = [("drop", drop), ("status429", status429), ("status503", status503)]
        for (name, value) in probabilities {
            guard let value else { continue }
            guard value.isFinite, (0...1).contains(value) else {
                throw .invalidRequest("'\(name)' must be a probability from 0 to 1.")
            }
        }
        guard probabilities.reduce(0, { $0 + ($1.1 ?? 0) }) <= 1 else {
            throw .invalidRequest("'drop', 'status429' and 'status503' must add up to at most 1.")
        }
        if let latencyMs, !(0...60_000).contains(latencyMs) {
            throw .invalidRequest("'latencyMs' must be an integer from 0 to 60000.")
        }
    }
}
