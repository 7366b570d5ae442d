import Foundation

/// What became of a provider request, as the capture log records it.
public enum NotificationOutcome: String, Sendable, Codable, CaseIterable {
    /// Sent to a connected device.
    case delivered
    /// Kept for a device that is not connected (only the last one per device is kept).
    case stored
    /// A background notification over the device's budget, held back until the budget allows.
    case throttled
    /// Replaced by a later notification before it was delivered.
    case coalesced
    /// Its `apns-expiration` passed before it could be delivered.
    case expired
    /// Accepted but never delivered (offline with `apns-expiration: 0`, the drop fault, a deleted device).
    case dropped
    /// Answered with an error.
    case refused
}

/// One change of a request's outcome, with when and why.
public struct LogEvent: Sendable, Codable, Equatable {
    /// The outcome reached.
    public var outcome: NotificationOutcome
    /// When, in milliseconds since 1970.
    public var timestamp: Int64
    /// Why, when it is not obvious (e.g. `fault`, `replaced by <apns-id>`).
    public var detail: String?

    /// Creates an event.
    public init(outcome: NotificationOutcome, timestamp: Int64, detail: String? = nil) {
        self.outcome = outcome
        self.timestamp = timestamp
        self.detail = detail
    }
}

/// One provider request as captured: what was sent, what was answered and what happened next.
public struct LogEntry: Sendable, Codable, Equatable {
    /// Position in the log, from 1.
    public var sequence: Int
    /// When the request arrived, in milliseconds since 1970.
    public var timestamp: Int64
    /// The request's `apns-id` (echoed or assigned).
    public var apnsId: String
    /// The `:method`.
    public var method: String
    /// The `:path`.
    public var path: String
    /// The device token from the path, when there was one.
    public var deviceToken: String?
    /// The request headers (the `authorization` value is redacted).
    public var headers: [String: String]
    /// The raw payload as text (cut at the configured limit).
    public var payload: String
    /// Whether ``payload`` was cut.
    public var payloadTruncated: Bool
    /// The HTTP status answered.
    public var status: Int
    /// The error reason answered, if any.
    public var reason: String?
    /// The current outcome (the last of ``events``).
    public var outcome: NotificationOutcome
    /// Every outcome the request went through, oldest first.
    public var events: [LogEvent]
}

/// A provider request as the capture log keeps it: the headers as they arrived (the `authorization`
/// value already redacted) and the payload bytes. The ``LogEntry`` (header dictionary, payload text) is
/// built only when the log is read.
struct CapturedRequest: Sendable {
    var sequence = 0
    var timestamp: Int64
    var apnsId: String
    var method: String
    var path: String
    var deviceToken: String?
    /// Header fields in arrival order.
    var headers: [ProviderRequest.Header]
    /// The payload bytes, already cut at the configured limit.
    var payload: Data
    var payloadTruncated: Bool
    var status: Int
    var reason: String?
    var outcome: NotificationOutcome
    var events: [LogEvent]

    /// The entry as ``Gateway/logEntries(after:limit:)`` reports it: repeated headers joined with `", "`.
    var entry: LogEntry {
        var fields: [String: String] = [:]
        for header in headers {
            if let existing = fields[header.name] {
                fields[header.name] = existing + ", " + header.value
            } else {
                fields[header.name] = header.value
            }
        }
        return LogEntry(
            sequence: sequence, timestamp: timestamp, apnsId: apnsId, method: method, path: path,
            deviceToken: deviceToken, headers: fields, payload: String(decoding: payload, as: UTF8.self),
            payloadTruncated: payloadTruncated, status: status, reason: reason, outcome: outcome, events: events)
    }
}

/// The bounded, ordered capture log.
struct CaptureLog: Sendable {
    private var entries: [CapturedRequest] = []
    private var start = 0
    private var nextSequence = 1
    let capacity: Int

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Appends an entry (its sequence is assigned here) and returns its sequence number.
    mutating func append(_ entry: CapturedRequest) -> Int {
        var entry = entry
        entry.sequence = nextSequence
        nextSequence += 1
        entries.append(entry)
        if entries.count - start > capacity { start += 1 }
        if start > 4096, start * 2 > entries.count {
            entries.removeFirst(start)
            start = 0
        }
        return entry.sequence
    }

    /// Records a new outcome for the entry `sequence`, if it is still in the log.
    mutating func record(_ outcome: NotificationOutcome, for sequence: Int, at timestamp: Int64, detail: String? = nil)
    {
        guard let index = index(of: sequence) else { return }
        entries[index].outcome = outcome
        entries[index].events.append(LogEvent(outcome: outcome, timestamp: timestamp, detail: detail))
    }

    /// Entries with a sequence above `after`, oldest first, at most `limit`.
    func entries(after: Int = 0, limit: Int = .max) -> [LogEntry] {
        let live = entries[start...]
        let firstSequence = live.first?.sequence ?? nextSequence
        let skip = max(0, after - firstSequence + 1)
        return live.dropFirst(skip).prefix(limit).map(\.entry)
    }

    private func index(of sequence: Int) -> Int? {
        guard let firstSequence = entries.first?.sequence else { return nil }
        let index = sequence - firstSequence
        guard index >= start, index < entries.count else { return nil }
        return index
    }
}
