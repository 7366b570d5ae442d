import Foundation

/// One accepted push message on its way to a subscription.
struct QueuedMessage: Sendable, Equatable {
    /// The id in the answer's `Location` (`/m/<id>`) and the Mozilla protocol's `version`.
    var messageID: String
    /// What reaches the listener: the decrypted text (the simulated browser's subscriptions) or the ciphertext
    /// (Mozilla-protocol subscriptions, whose browser holds the keys).
    var payload: Payload
    /// The body's length in bytes.
    var bodyBytes: Int
    var ttl: Int
    var urgency: WebPushUrgency
    var topic: String?
    var acceptedAt: Date
    var logSequence: Int

    enum Payload: Sendable, Equatable {
        case plaintext(String)
        case ciphertext([UInt8])
    }

    var expiresAt: Date { acceptedAt.addingTimeInterval(TimeInterval(ttl)) }
}

/// What a ``MessageQueue`` did with a message.
enum QueueEvent: Sendable, Equatable {
    /// Hand it to the listener now.
    case deliver(QueuedMessage)
    /// Kept until the subscription can be reached or its TTL passes.
    case stored(QueuedMessage)
    /// Replaced by a newer message with the same `Topic` (RFC 8030 §5.4); the newer one's id.
    case replaced(QueuedMessage, by: String)
    /// Its TTL passed before delivery.
    case expired(QueuedMessage)
    /// `TTL: 0` while the subscription could not take it at once (RFC 8030 §5.2).
    case dropped(QueuedMessage, reason: String)
}

/// One subscription's store-and-forward state, as RFC 8030 §5 has it: while it cannot be reached, messages are
/// kept until their TTL passes; `TTL: 0` is delivered only if it can be at once; a kept message is replaced by a
/// newer one with the same `Topic`. A value: every method returns what happened, the caller delivers and logs.
struct MessageQueue: Sendable {
    /// Kept messages, oldest first.
    private(set) var kept: [QueuedMessage] = []

    /// Messages kept.
    var count: Int { kept.count }

    /// A newly accepted message; `reachable` says whether the subscription can take it now.
    mutating func accept(_ message: QueuedMessage, reachable: Bool, now: Date) -> [QueueEvent] {
        var events: [QueueEvent] = []
        if let topic = message.topic, let index = kept.firstIndex(where: { $0.topic == topic }) {
            events.append(.replaced(kept.remove(at: index), by: message.messageID))
        }
        if reachable { return events + [.deliver(message)] }
        if message.ttl == 0 { return events + [.dropped(message, reason: "TTL 0 while unreachable")] }
        kept.append(message)
        return events + [.stored(message)]
    }

    /// The subscription became reachable: what was kept goes out in the order it was accepted (expired ones
    /// expire).
    mutating func drain(now: Date) -> [QueueEvent] {
        let events = expire(now: now)
        defer { kept = [] }
        return events + kept.map { .deliver($0) }
    }

    /// Kept messages whose TTL has passed expire.
    mutating func expire(now: Date) -> [QueueEvent] {
        var events: [QueueEvent] = []
        kept.removeAll { message in
            guard message.expiresAt <= now else { return false }
            events.append(.expired(message))
            return true
        }
        return events
    }

    /// Everything kept is dropped (the subscription was deleted).
    mutating func removeAll() -> [QueuedMessage] {
        defer { kept = [] }
        return kept
    }
}
