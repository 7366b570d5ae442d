import Foundation
import Push

/// A push that carries no content: a badge count and/or `content-available`, plus an opaque device alias and
/// the tag of the sync state it announces (see ``StateTag``).
///
/// Every field is typed and validated, so no initializer can place free text (a subject, a sender, a body)
/// in a signal. The payload bytes are deterministic, with keys always in this order:
///
/// ```
/// {"aps":{"badge":3,"content-available":1},"acct":"<alias>","st":"<tag>"}
/// ```
///
/// `badge` and `content-available` are each left out when not set, and so are `acct` and `st`.
public struct ContentFreeSignal: Sendable, Hashable {
    /// The badge count to show on the app icon, or `nil` to leave it unchanged.
    public let badge: Int?
    /// Whether the signal wakes the app in the background (`content-available: 1`).
    public let contentAvailable: Bool
    /// The device alias (`acct`), or `nil`.
    public let alias: DeviceAlias?
    /// The tag of the announced state under the device's signal key (`st`), or `nil`.
    public let tag: StateTag?

    /// Creates a signal from validated parts; throws ``APNsValidationError/emptySignal`` when it has neither a
    /// badge nor `content-available`, and ``APNsValidationError/negativeBadge`` for a negative badge.
    public init(
        badge: Int? = nil, contentAvailable: Bool = true, alias: DeviceAlias? = nil, tag: StateTag? = nil
    ) throws(APNsValidationError) {
        if let badge, badge < 0 { throw .negativeBadge }
        guard badge != nil || contentAvailable else { throw .emptySignal }
        self.badge = badge
        self.contentAvailable = contentAvailable
        self.alias = alias
        self.tag = tag
    }

    /// Creates a signal, validating the alias and tag strings (see ``DeviceAlias`` and ``StateTag``).
    public init(
        badge: Int? = nil, contentAvailable: Bool = true, alias: String?, tag: String?
    ) throws(APNsValidationError) {
        let alias = try alias.map { s throws(APNsValidationError) in
            do { return try DeviceAlias(s) } catch { throw .invalidAlias }
        }
        let tag = try tag.map { s throws(APNsValidationError) in
            do { return try StateTag(s) } catch { throw .invalidState }
        }
        try self.init(badge: badge, contentAvailable: contentAvailable, alias: alias, tag: tag)
    }

    /// The APNs form of a service-neutral signal: `content-available: 1`, and the badge for a badge signal.
    public init(_ signal: PushSignal) {
        // Cannot fail: content-available is set and PushSignal refuses a negative badge.
        try! self.init(badge: signal.badge, contentAvailable: true, alias: signal.alias, tag: signal.tag)
    }

    /// A silent wake-up: `content-available: 1` and no badge.
    public static func background(alias: DeviceAlias? = nil, tag: StateTag? = nil) -> ContentFreeSignal {
        // Cannot fail: content-available is set and there is no badge.
        try! ContentFreeSignal(badge: nil, contentAvailable: true, alias: alias, tag: tag)
    }

    /// The push type Apple requires: `background` for a content-available-only signal, `alert` once it
    /// carries a badge (a user-visible change).
    public var pushType: APNsPushType { badge == nil ? .background : .alert }

    /// The priority used when none is chosen: 5 for background, 10 for alert.
    public var defaultPriority: APNsPriority { pushType == .background ? .conservePower : .immediate }

    /// The JSON payload, byte for byte (see the type's documentation for the key order).
    public var payload: [UInt8] {
        var aps: [String] = []
        if let badge { aps.append("\"badge\":\(badge)") }
        if contentAvailable { aps.append("\"content-available\":1") }
        var json = "{\"aps\":{" + aps.joined(separator: ",") + "}"
        // Alias and tag are restricted to characters that need no JSON escaping.
        if let alias { json += ",\"acct\":\"\(alias.rawValue)\"" }
        if let tag { json += ",\"st\":\"\(tag.rawValue)\"" }
        json += "}"
        return Array(json.utf8)
    }
}
