import Foundation
import MailboxStore
import ServiceMetrics
import SignalDispatch

/// A wait as a `Retry-After` value: whole seconds, rounded up, at least 1.
func retryAfterSeconds(_ wait: Double) -> Int { max(1, Int(wait.rounded(.up))) }

/// How ``LoginThrottle`` counts failed sign-ins, each limit within ``window``.
public struct SignInLimits: Sendable, Equatable {
    /// Failures for one username from one address before that pair is refused.
    public var perUsernameAndAddress = 5
    /// Failures from one address (any username) before the address is refused.
    public var perAddress = 20
    /// Failures for one username (any address) before its sign-ins are delayed.
    public var perUsernameBeforeDelay = 5
    /// The first delay, in seconds; each further failure doubles it.
    public var firstDelay = 0.25
    /// The longest delay, in seconds.
    public var maximumDelay = 4.0
    /// The sliding window, in seconds.
    public var window: TimeInterval = 300

    /// The defaults.
    public init() {}
}

/// Slows password guessing without letting anyone lock an owner out. Failed sign-ins are counted in a sliding
/// window under three keys:
/// - a username from one client address: over its limit, that address is refused for that username (429 with
///   `Retry-After`) until the oldest failure leaves the window;
/// - a client address, whatever the username: over its limit, the address is refused for every username;
/// - a username from anywhere: over its limit, each sign-in for it waits a back-off delay (doubling with every
///   further failure, capped) and is then checked as usual; it is never refused on this count alone, so the owner
///   signs in from another address however many addresses guess.
///
/// The failures are kept in the store, so the limits hold across every instance sharing it (and across restarts):
/// trying the next instance behind the load balancer buys an attacker nothing.
package final class LoginThrottle: Sendable {
    /// What to do with a sign-in attempt.
    package enum Decision: Equatable {
        /// Check the password after waiting `delay` seconds (0: at once).
        case proceed(delay: Double)
        /// Refuse it; the client may try again after this many seconds.
        case refuse(retryAfter: Int)
    }

    private let store: MailboxStore
    let limits: SignInLimits

    package init(store: MailboxStore, limits: SignInLimits) {
        self.store = store
        self.limits = limits
    }

    private static func pairKey(_ username: String, _ address: String) -> String {
        "login-pair:" + address + " " + username.lowercased()
    }
    private static func usernameKey(_ username: String) -> String { "login-user:" + username.lowercased() }
    private static func addressKey(_ address: String) -> String { "login-address:" + address }

    /// Whether an attempt for `username` from `address` may go ahead, and after what delay.
    package func decide(username: String, address: String) async throws -> Decision {
        var wait: Double?
        for (key, limit) in [
            (Self.pairKey(username, address), limits.perUsernameAndAddress),
            (Self.addressKey(address), limits.perAddress),
        ] {
            if let keyWait = try await store.waitBeforeEvent(key, limit: limit, within: limits.window) {
                wait = max(wait ?? 0, keyWait)
            }
        }
        if let wait { return .refuse(retryAfter: retryAfterSeconds(wait)) }
        let failures = try await store.recentEvents(Self.usernameKey(username), within: limits.window).count
        return .proceed(delay: Self.delay(failures: failures, limits: limits))
    }

    /// The delay before checking a password for a username with `failures` recent failures.
    static func delay(failures: Int, limits: SignInLimits) -> Double {
        guard failures >= limits.perUsernameBeforeDelay else { return 0 }
        let doublings = min(failures - limits.perUsernameBeforeDelay, 30)
        return min(limits.maximumDelay, limits.firstDelay * Double(1 << doublings))
    }

    /// Records a failed attempt.
    package func recordFailure(username: String, address: String) async throws {
        for key in [Self.pairKey(username, address), Self.addressKey(address), Self.usernameKey(username)] {
            try await store.recordEvent(key, keep: limits.window)
        }
    }

    /// Forgets the username's failures (from everywhere, and from this address) after a successful sign-in.
    package func recordSuccess(username: String, address: String) async throws {
        try await store.forgetEvents(Self.usernameKey(username))
        try await store.forgetEvents(Self.pairKey(username, address))
    }
}
