import Foundation
import Locking

/// Counts failed logins per username and per client address in a sliding window; over the limit, logins are
/// refused with a retry delay until the oldest failure leaves the window.
final class LoginThrottle: Sendable {
    private let perUsername: Int
    private let perAddress: Int
    private let window: TimeInterval
    private let failures = LockedValue<[String: [Double]]>([:])

    init(perUsername: Int, perAddress: Int, window: TimeInterval) {
        self.perUsername = perUsername
        self.perAddress = perAddress
        self.window = window
    }

    /// Seconds to wait before another attempt is allowed, or `nil` when one is allowed now.
    func retryAfter(username: String, address: String, now: Double) -> Int? {
        failures.withLock { table in
            var wait: Double?
            for (key, limit) in [("u:" + username.lowercased(), perUsername), ("a:" + address, perAddress)] {
                let recent = (table[key] ?? []).filter { $0 > now - window }
                table[key] = recent.isEmpty ? nil : recent
                if recent.count >= limit, let oldest = recent.first {
                    wait = max(wait ?? 0, oldest + window - now)
                }
            }
            return wait.map { max(1, Int($0.rounded(.up))) }
        }
    }

    /// Records a failed attempt.
    func recordFailure(username: String, address: String, now: Double) {
        failures.withLock { table in
            table["u:" + username.lowercased(), default: []].append(now)
            table["a:" + address, default: []].append(now)
            if table.count > 100_000 { table = table.filter { $0.value.last ?? 0 > now - window } }
        }
    }

    /// Forgets the username's failures after a successful login.
    func recordSuccess(username: String) {
        _ = failures.withLock { $0.removeValue(forKey: "u:" + username.lowercased()) }
    }
}
