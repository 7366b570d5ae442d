import Foundation

/// The policy of an ``APNsGateway``: whom it trusts, what it accepts, how it throttles and what it breaks.
public struct APNsGatewayConfiguration: Sendable {
    /// The provider signing keys whose tokens are accepted.
    public var providerKeys: [ProviderKey]
    /// The topics (bundle ids) providers may push to; empty allows every topic.
    public var allowedTopics: Set<String>
    /// Background notifications delivered per device per ``backgroundWindow``; more are delayed and
    /// coalesced. `0` disables the budget.
    public var backgroundBudget: Int
    /// The window of the background budget, in seconds.
    public var backgroundWindow: TimeInterval
    /// How long a provider token is valid after its `iat`, in seconds.
    public var providerTokenLifetime: TimeInterval
    /// The window in which a signing key's token may be replaced only once, in seconds.
    public var providerTokenUpdateInterval: TimeInterval
    /// Injected failures.
    public var faults: APNsFaults
    /// The most entries the capture log keeps; older ones are forgotten.
    public var logCapacity: Int
    /// The most payload bytes copied into a capture-log entry.
    public var logPayloadLimit: Int

    /// Creates a configuration. The defaults follow Apple's documented behaviour: tokens live an hour
    /// and are replaced at most every 20 minutes; background pushes are limited to a few per hour.
    public init(
        providerKeys: [ProviderKey] = [], allowedTopics: Set<String> = [], backgroundBudget: Int = 3,
        backgroundWindow: TimeInterval = 3600, providerTokenLifetime: TimeInterval = 3600,
        providerTokenUpdateInterval: TimeInterval = 1200, faults: APNsFaults = APNsFaults(),
        logCapacity: Int = 100_000, logPayloadLimit: Int = 8192
    ) {
        self.providerKeys = providerKeys
        self.allowedTopics = allowedTopics
        self.backgroundBudget = backgroundBudget
        self.backgroundWindow = backgroundWindow
        self.providerTokenLifetime = providerTokenLifetime
        self.providerTokenUpdateInterval = providerTokenUpdateInterval
        self.faults = faults
        self.logCapacity = logCapacity
        self.logPayloadLimit = logPayloadLimit
    }
}
