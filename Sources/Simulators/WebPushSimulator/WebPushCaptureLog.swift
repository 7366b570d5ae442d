import Foundation
import SimulatorSupport

/// What became of a push request, as the capture log records it.
public enum WebPushOutcome: String, Sendable, Codable, CaseIterable {
    /// Handed to the subscription's listener (a message stream, or a Mozilla-protocol socket).
    case delivered
    /// The Mozilla-protocol client acknowledged it.
    case acknowledged
    /// Kept for a subscription that could not take it.
    case stored
    /// Replaced by a newer message with the same `Topic` before delivery.
    case replaced
    /// Its TTL passed before delivery.
    case expired
    /// Accepted and never delivered (the drop fault, `TTL: 0` while unreachable, the subscription deleted).
    case dropped
    /// Accepted (201) but not delivered: the body does not decrypt (or, for a Mozilla-protocol subscription,
    /// its layout is wrong), so a browser would drop it.
    case undecryptable
    /// The browser took it but its service worker's push handler failed (a Mozilla-protocol nack).
    case clientError
    /// Answered with an error.
    case refused
}

/// One change of an entry's outcome.
public struct WebPushLogEvent: Sendable, Codable, Equatable {
    /// The outcome reached.
    public var outcome: WebPushOutcome
    /// When, in milliseconds since 1970.
    public var timestamp: Int64
    /// Why, when it is not obvious (`fault`, `scripted`, `replaced by <id>`, `undecryptable: <reason>`, …).
    public var detail: String?
}

/// The RFC 8030 and RFC 8188 headers of a request as received (never `Authorization`).
public struct WebPushLoggedHeaders: Sendable, Codable, Equatable {
    /// `TTL`.
    public var ttl: String?
    /// `Urgency`.
    public var urgency: String?
    /// `Topic`.
    public var topic: String?
    /// `Content-Encoding`.
    public var contentEncoding: String?
    /// `Content-Type`.
    public var contentType: String?
}

/// What the sim saw of an `aes128gcm` body: its layout, never its plaintext.
public struct WebPushBodyLayout: Sendable, Codable, Equatable {
    /// The header's record size.
    public var recordSize: UInt32
    /// Zero bytes after the delimiter (known only where the sim holds the keys).
    public var paddingLength: Int?

    /// Creates a layout description.
    public init(recordSize: UInt32, paddingLength: Int?) {
        self.recordSize = recordSize
        self.paddingLength = paddingLength
    }
}

/// One push request as captured. It proves what the sender put on the wire: headers, the decoded VAPID
/// claims (never the token), the body's length and layout (never its plaintext).
public struct WebPushLogEntry: Sendable, Codable, Equatable {
    /// Position in the log, from 1.
    public var sequence: Int
    /// When the request arrived, in milliseconds since 1970.
    public var timestamp: Int64
    /// The protocol it arrived in: `HTTP/2` or `HTTP/1.1`.
    public var httpVersion: String
    /// The method.
    public var method: String
    /// The path (cut at 200 characters).
    public var path: String
    /// The subscription the path names, when it names one.
    public var subscription: String?
    /// The message id assigned (accepted requests).
    public var messageId: String?
    /// The push headers received.
    public var headers: WebPushLoggedHeaders
    /// The VAPID credentials, decoded.
    public var vapid: VAPIDSummary?
    /// The body's length in bytes.
    public var bodyBytes: Int
    /// The body's `aes128gcm` layout, when it was readable.
    public var layout: WebPushBodyLayout?
    /// The HTTP status answered.
    public var status: Int
    /// The refusal's message, when refused.
    public var error: String?
    /// The current outcome (the last of ``events``).
    public var outcome: WebPushOutcome
    /// Every outcome the request went through, oldest first.
    public var events: [WebPushLogEvent]
}

extension WebPushLogEntry: CaptureLogEntry {
    /// Records a new outcome as the last event.
    public mutating func record(_ outcome: WebPushOutcome, at timestamp: Int64, detail: String?) {
        self.outcome = outcome
        events.append(WebPushLogEvent(outcome: outcome, timestamp: timestamp, detail: detail))
    }
}
