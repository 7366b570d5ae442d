import Foundation
import MailboxStore
import ServiceMetrics
import SignalDispatch

/// Counts failed logins per username and per client address in a sliding window; over the limit, logins are
/// refused with a retry delay until the oldest failure leaves the window. The failures are kept in the store, so
/// the limit holds across every instance sharing it (and across restarts): trying the next instance behind the
/// load balancer buys an attacker nothing.
final class LoginThrottle: Sendable {
    private let store: MailboxStore
    private let perUsername: Int
    private let perAddress: Int
    private let window: TimeInterval

    init(store: MailboxStore, perUsername: Int, perAddress: Int, window: TimeInterval) {
        self.store = store
        self.perUsername = perUsername
        self.perAddress = perAddress
        self.window = window
    }

    private static func usernameKey(_ username: String) -> String { "login-user:" + username.lowercased() }
    private static func addressKey(_ address: String) -> String { "login-address:" + address }

    /// Seconds to wait before another attempt is allowed, or `nil` when one is allowed now.
    func retryAfter(username: String, address: String, now: Double) async throws -> Int? {
        var wait: Double?
        for (key, limit) in [(Self.usernameKey(username), perUsername), (Self.addressKey(address), perAddress)] {
            let recent = try await store.recentEvents(key, within: window)
            if recent.count >= limit, let oldest = recent.first {
                wait = max(wait ?? 0, oldest + window - now)
            }
        }
        return wait.map { max(1, Int($0.rounded(.up))) }
    }

    /// Records a failed attempt.
    func recordFailure(username: String, address: String) async throws {
        try await store.recordEvent(Self.usernameKey(username), keep: window)
        try await store.recordEvent(Self.addressKey(address), keep: window)
    }

    /// Forgets the username's failures after a successful login.
    func recordSuccess(username: String) async throws {
        try await store.forgetEvents(Self.usernameKey(username))
    }
}
