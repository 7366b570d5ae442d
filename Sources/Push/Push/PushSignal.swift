/// What a signal says, whatever the push service: a device alias, the tag of the state it announces and, for
/// badge signals, the unread count. Nothing else can be put in it; each service maps it to its own wire form
/// (APNs `aps`, FCM `data`, an encrypted Web Push body) and guards the bytes before they leave.
public struct PushSignal: Sendable, Hashable {
    /// What the app does with a signal.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// A visible badge (the unread count) plus a wake-up.
        case badge
        /// A silent wake-up only.
        case background
    }

    /// The device's opaque alias (`acct`).
    public let alias: DeviceAlias
    /// The tag of the announced state under the device's key (`st`), or `nil` for a device registered before
    /// signal keys existed (it fetches on every signal).
    public let tag: StateTag?
    /// The unread count, for ``Kind/badge`` signals; `nil` for background ones.
    public let badge: Int?

    /// Creates a signal; throws ``SignalFieldError/negativeBadge`` for a negative badge.
    public init(alias: DeviceAlias, tag: StateTag?, badge: Int?) throws(SignalFieldError) {
        if let badge, badge < 0 { throw .negativeBadge }
        self.alias = alias
        self.tag = tag
        self.badge = badge
    }

    /// The kind: ``Kind/badge`` when it carries a count.
    public var kind: Kind { badge == nil ? .background : .badge }
}
