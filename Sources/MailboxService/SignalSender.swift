import MailboxStore

/// What became of one signal.
public enum SignalOutcome: Sendable, Equatable {
    /// Accepted by APNs.
    case delivered
    /// The registration is dead (410 Unregistered, BadDeviceToken, DeviceTokenNotForTopic…): delete the device,
    /// if APNs stopped accepting it after it was last registered (`unregisteredAt`, seconds since 1970).
    case dropRegistration(reason: String, unregisteredAt: Double?)
    /// A transient failure (429, 5xx, connection): try again, after `retryAfter` seconds when the server said so.
    case retry(reason: String, retryAfter: Double?)
    /// The signal can never be sent as it is (a payload the guard refused, a 4xx that is our defect): drop it
    /// and report the defect.
    case defect(reason: String)
}

/// Sends one content-free signal for an outbox row. The APNs implementation builds the signal from the row
/// (badge = unread count now, `st` = state now, `acct` = the device's alias) and posts it to APNs.
public protocol SignalSender: Sendable {
    /// Sends the signal for `item` and reports the outcome. Never throws: every failure is an outcome.
    func send(_ item: OutboxItem) async -> SignalOutcome
    /// Whether the signal for `item` is a background (content-available only) push, which Apple throttles.
    func isBackgroundOnly(_ item: OutboxItem) -> Bool
    /// Whether devices of the app with bundle id `topic` can be signalled (registration refuses other topics).
    func serves(topic: String) -> Bool
    /// Keeps what every process sending for this store must agree on (APNs provider tokens) in `store`. Called
    /// once, before the first send.
    func share(in store: MailboxStore)
}

extension SignalSender {
    /// Serves every topic.
    public func serves(topic: String) -> Bool { true }
    /// Nothing to share.
    public func share(in store: MailboxStore) {}
}
