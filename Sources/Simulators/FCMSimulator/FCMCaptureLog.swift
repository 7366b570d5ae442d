import Foundation
import SimulatorSupport

/// What became of a provider request, as the capture log records it.
public enum FCMOutcome: String, Sendable, Codable, CaseIterable {
    /// Sent to a device's open message stream.
    case delivered
    /// Kept for a device that could not take it (offline or not connected).
    case stored
    /// Held back by the collapsible-message throttle.
    case throttled
    /// Replaced by a newer message with the same collapse key before delivery.
    case collapsed
    /// Its TTL passed before delivery.
    case expired
    /// Accepted and never delivered (drop fault, Android's limits, TTL 0 while offline, uninstalled).
    case dropped
    /// Accepted for a topic or condition (fcm-sim has no subscribers).
    case accepted
    /// Checked and answered without delivering (`validate_only`).
    case validated
    /// A token request that issued an access token.
    case granted
    /// Answered with an error.
    case refused
}

/// One change of an entry's outcome.
public struct FCMLogEvent: Sendable, Codable, Equatable {
    /// The outcome reached.
    public var outcome: FCMOutcome
    /// When, in milliseconds since 1970.
    public var timestamp: Int64
    /// Why, when it is not obvious (`fault`, `scripted`, `collapsed by <id>`, …).
    public var detail: String?
}

/// One provider request as captured.
public struct FCMLogEntry: Sendable, Codable, Equatable {
    /// Position in the log, from 1.
    public var sequence: Int
    /// When the request arrived, in milliseconds since 1970.
    public var timestamp: Int64
    /// `send` (`messages:send`) or `token` (`/token`).
    public var kind: String
    /// The protocol the request arrived in: `HTTP/2` or `HTTP/1.1`.
    public var httpVersion: String
    /// The project of the path (sends).
    public var project: String?
    /// The message id assigned (accepted sends).
    public var messageId: String?
    /// The registration token the message was for.
    public var token: String?
    /// The service account that asked (token requests, and sends with a valid access token).
    public var clientEmail: String?
    /// The raw request body (sends only; the assertion of a token request is never kept), cut at the limit.
    public var body: String?
    /// Whether ``body`` was cut.
    public var bodyTruncated: Bool?
    /// The HTTP status answered.
    public var status: Int
    /// FCM's `errorCode` (sends) or the OAuth `error` (token requests), when refused.
    public var errorCode: String?
    /// The current outcome (the last of ``events``).
    public var outcome: FCMOutcome
    /// Every outcome the request went through, oldest first.
    public var events: [FCMLogEvent]
}

extension FCMLogEntry: CaptureLogEntry {
    /// Records a new outcome as the last event.
    public mutating func record(_ outcome: FCMOutcome, at timestamp: Int64, detail: String?) {
        self.outcome = outcome
        events.append(FCMLogEvent(outcome: outcome, timestamp: timestamp, detail: detail))
    }
}

/// The capture log of fcm-sim.
typealias FCMCaptureLog = CaptureLog<FCMLogEntry>
