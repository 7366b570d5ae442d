import Foundation
import JSONText

/// A message accepted for a device and not yet delivered.
struct QueuedMessage: Sendable, Equatable {
    var messageID: String
    var data: [String: String]
    var priority: FCMPriority
    var collapseKey: String?
    /// The requested TTL in seconds (`nil`: the 28-day default).
    var ttl: Double?
    var acceptedAt: Date
    /// The capture-log entry to update as the message moves on.
    var logSequence: Int

    var expiresAt: Date { acceptedAt.addingTimeInterval(ttl ?? FCMSendRequest.maximumTTL) }

    /// The event a message stream gets: `{"messageId","data","priority","collapseKey","ttl"}`.
    var eventJSON: String {
        let object: JSONValue = [
            "messageId": .string(messageID), "data": .object(data.mapValues(JSONValue.string)),
            "priority": .string(priority.rawValue), "ttl": .double(ttl ?? FCMSendRequest.maximumTTL),
            "collapseKey": collapseKey.map(JSONValue.string) ?? .null,
        ]
        return object.json
    }
}

/// What became of a message in a device's queue, for the capture log and the counters.
enum QueueEvent: Sendable, Equatable {
    /// Hand it to the device now.
    case deliver(QueuedMessage)
    /// Kept for the offline device.
    case stored(QueuedMessage)
    /// Held back by the collapsible throttle.
    case throttled(QueuedMessage)
    /// Replaced by a newer message with the same collapse key (its id).
    case collapsed(QueuedMessage, by: String)
    /// Its TTL passed before delivery.
    case expired(QueuedMessage)
    /// Pushed out by Android's limits (more than 4 collapse keys, more than 100 pending messages), or TTL 0
    /// while the device could not take it.
    case dropped(QueuedMessage, reason: String)
}

/// One device's store-and-forward state, with Android's rules: while it cannot be reached, at most four
/// distinct collapse keys (the newest message per key) and at most 100 non-collapsible messages (the oldest
/// dropped beyond) are kept, each until its TTL; TTL 0 is delivered only if the device can take it at once.
/// Collapsible messages pass a throttle per device — a burst, then one per refill period — and are delayed,
/// not refused. A value: every method returns what happened, the caller delivers and logs.
struct DeviceQueue: Sendable {
    let burst: Int
    let refillSeconds: Double
    let maxCollapseKeys: Int
    let maxPending: Int
    /// Collapsible messages kept while offline, oldest first, one per key.
    private(set) var collapsible: [QueuedMessage] = []
    /// Non-collapsible messages kept while offline, oldest first.
    private(set) var plain: [QueuedMessage] = []
    /// Collapsible messages waiting for the throttle, oldest first, one per key.
    private(set) var throttled: [QueuedMessage] = []
    private var tokens: Double
    private var refilledAt: Date

    init(burst: Int, refillSeconds: Double, maxCollapseKeys: Int, maxPending: Int, now: Date) {
        self.burst = burst
        self.refillSeconds = refillSeconds
        self.maxCollapseKeys = maxCollapseKeys
        self.maxPending = maxPending
        tokens = Double(burst)
        refilledAt = now
    }

    /// Messages held in any way.
    var count: Int { collapsible.count + plain.count + throttled.count }

    /// When the throttle lets the next held message go (`nil` if nothing is throttled).
    func nextRelease(now: Date) -> Date? {
        guard !throttled.isEmpty else { return nil }
        if tokens >= 1 { return now }
        return refilledAt.addingTimeInterval((1 - tokens) * refillSeconds)
    }

    /// A newly accepted message; `reachable` says whether the device can take it now.
    mutating func accept(_ message: QueuedMessage, reachable: Bool, now: Date) -> [QueueEvent] {
        if reachable { return release(message, now: now) }
        if message.ttl == 0 { return [.dropped(message, reason: "ttl 0 while offline")] }
        var events: [QueueEvent] = []
        if let key = message.collapseKey {
            if let index = collapsible.firstIndex(where: { $0.collapseKey == key }) {
                events.append(.collapsed(collapsible.remove(at: index), by: message.messageID))
            } else if let index = throttled.firstIndex(where: { $0.collapseKey == key }) {
                events.append(.collapsed(throttled.remove(at: index), by: message.messageID))
            }
            collapsible.append(message)
            while collapsible.count > maxCollapseKeys {
                events.append(.dropped(collapsible.removeFirst(), reason: "more than \(maxCollapseKeys) collapse keys"))
            }
        } else {
            plain.append(message)
            while plain.count > maxPending {
                events.append(.dropped(plain.removeFirst(), reason: "more than \(maxPending) pending messages"))
            }
        }
        events.append(.stored(message))
        return events
    }

    /// The device became reachable: what was kept goes out in the order it was accepted (expired ones
    /// expire), collapsible ones through the throttle.
    mutating func drain(now: Date) -> [QueueEvent] {
        var events = expire(now: now)
        let kept = (collapsible + plain).sorted { ($0.acceptedAt, $0.logSequence) < ($1.acceptedAt, $1.logSequence) }
        collapsible = []
        plain = []
        for message in kept { events += release(message, now: now) }
        return events
    }

    /// Time passed: throttled messages the throttle now allows go out (`reachable`), kept ones expire.
    mutating func tick(reachable: Bool, now: Date) -> [QueueEvent] {
        var events = expire(now: now)
        guard reachable else { return events }
        refill(now: now)
        while !throttled.isEmpty, tokens >= 1 {
            tokens -= 1
            events.append(.deliver(throttled.removeFirst()))
        }
        return events
    }

    /// Everything held is dropped (the app was uninstalled).
    mutating func removeAll() -> [QueuedMessage] {
        defer {
            collapsible = []
            plain = []
            throttled = []
        }
        return collapsible + plain + throttled
    }

    private mutating func release(_ message: QueuedMessage, now: Date) -> [QueueEvent] {
        guard let key = message.collapseKey else { return [.deliver(message)] }
        refill(now: now)
        if throttled.isEmpty, tokens >= 1 {
            tokens -= 1
            return [.deliver(message)]
        }
        var events: [QueueEvent] = []
        if let index = throttled.firstIndex(where: { $0.collapseKey == key }) {
            events.append(.collapsed(throttled.remove(at: index), by: message.messageID))
        }
        throttled.append(message)
        events.append(.throttled(message))
        return events
    }

    private mutating func refill(now: Date) {
        let elapsed = now.timeIntervalSince(refilledAt)
        guard elapsed > 0 else { return }
        tokens = min(Double(burst), tokens + elapsed / refillSeconds)
        refilledAt = now
    }

    private mutating func expire(now: Date) -> [QueueEvent] {
        var events: [QueueEvent] = []
        func sweep(_ list: inout [QueuedMessage]) {
            list.removeAll { message in
                guard message.expiresAt <= now else { return false }
                events.append(.expired(message))
                return true
            }
        }
        sweep(&collapsible)
        sweep(&plain)
        sweep(&throttled)
        return events
    }
}
