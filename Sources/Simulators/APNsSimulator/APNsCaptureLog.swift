import Foundation
import HTTPTypes
import SimulatorSupport

/// What became of a provider request, as the capture log records it.
public enum APNsOutcome: String, Sendable, Codable, CaseIterable {
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
public struct APNsLogEvent: Sendable, Codable, Equatable {
    /// The outcome reached.
    public var outcome: APNsOutcome
    /// When, in milliseconds since 1970.
    public var timestamp: Int64
    /// Why, when it is not obvious (e.g. `fault`, `replaced by <apns-id>`).
    public var detail: String?

    /// Creates an event.
    public init(outcome: APNsOutcome, timestamp: Int64, detail: String? = nil) {
        self.outcome = outcome
        self.timestamp = timestamp
        self.detail = detail
    }
}

/// One provider request as captured: what was sent, what was answered and what happened next.
public struct APNsLogEntry: Sendable, Codable, Equatable {
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
    /// The environment of the provider listener the request arrived on; absent when one listener serves both.
    public var environment: APNsEnvironment?
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
    public var outcome: APNsOutcome
    /// Every outcome the request went through, oldest first.
    public var events: [APNsLogEvent]
}

/// A provider request as the capture log keeps it, compactly: the text fields, the headers as they
/// arrived (the `authorization` value already redacted) and the payload bytes share one byte buffer,
/// with the names of the usual headers as one-byte codes. The ``APNsLogEntry`` (header dictionary, payload
/// text) is built only when the log is read.
struct CapturedRequest: CaptureLogEntry {
    /// Header names stored as a one-byte code (their position plus one); other names are stored in full.
    static let commonHeaderNames = [
        "authorization", "apns-id", "apns-topic", "apns-push-type", "apns-priority", "apns-expiration",
        "apns-collapse-id", "content-type", "content-length", "user-agent", "accept", "accept-encoding",
    ]

    var sequence = 0
    var timestamp: Int64
    var status: Int
    var reason: RejectionReason?
    var outcome: APNsOutcome
    var payloadTruncated: Bool
    var environment: APNsEnvironment?
    /// The first event, kept inline (most requests have exactly one).
    var firstEvent: APNsLogEvent?
    /// The events after the first.
    var laterEvents: [APNsLogEvent] = []
    /// `apnsId`, `method`, `path`, the device token, the encoded headers and the payload, back to back.
    private var bytes: [UInt8]
    private var methodStart: UInt32
    private var pathStart: UInt32
    private var tokenStart: UInt32
    private var headersStart: UInt32
    private var payloadStart: UInt32
    private var hasToken: Bool

    /// Captures a request; `payload` is the part of the body to keep (already cut at the limit), and the
    /// value of every `authorization` header is replaced by `[redacted]`.
    init(
        timestamp: Int64, apnsId: String, method: String, path: String, deviceToken: String?,
        headers: [HTTPField], payload: UnsafeRawBufferPointer, payloadTruncated: Bool, status: Int,
        reason: RejectionReason?, outcome: APNsOutcome, event: APNsLogEvent?, environment: APNsEnvironment? = nil
    ) {
        self.timestamp = timestamp
        self.environment = environment
        self.status = status
        self.reason = reason
        self.outcome = outcome
        self.payloadTruncated = payloadTruncated
        firstEvent = event
        var bytes: [UInt8] = []
        var capacity = apnsId.utf8.count + method.utf8.count + path.utf8.count + (deviceToken?.utf8.count ?? 0)
        capacity += payload.count
        for header in headers { capacity += header.name.utf8.count + header.value.utf8.count + 4 }
        bytes.reserveCapacity(capacity)
        bytes.append(contentsOf: apnsId.utf8)
        methodStart = UInt32(bytes.count)
        bytes.append(contentsOf: method.utf8)
        pathStart = UInt32(bytes.count)
        bytes.append(contentsOf: path.utf8)
        tokenStart = UInt32(bytes.count)
        hasToken = deviceToken != nil
        if let deviceToken { bytes.append(contentsOf: deviceToken.utf8) }
        headersStart = UInt32(bytes.count)
        for header in headers {
            if let code = Self.code(of: header.name) {
                bytes.append(code)
            } else {
                bytes.append(0)
                Self.appendLength(header.name.utf8.count, to: &bytes)
                bytes.append(contentsOf: header.name.utf8)
            }
            let value = header.name == "authorization" ? "[redacted]" : header.value
            Self.appendLength(value.utf8.count, to: &bytes)
            bytes.append(contentsOf: value.utf8)
        }
        payloadStart = UInt32(bytes.count)
        bytes.append(contentsOf: payload)
        self.bytes = bytes
    }

    var apnsId: String { text(0, methodStart) }
    var method: String { text(methodStart, pathStart) }
    var path: String { text(pathStart, tokenStart) }
    var deviceToken: String? { hasToken ? text(tokenStart, headersStart) : nil }

    /// The header fields in arrival order.
    var headers: [HTTPField] {
        var result: [HTTPField] = []
        var index = Int(headersStart)
        let end = Int(payloadStart)
        while index < end {
            let code = bytes[index]
            index += 1
            let name: String
            if code == 0 {
                let count = Self.readLength(bytes, at: &index)
                name = String(decoding: bytes[index..<(index + count)], as: UTF8.self)
                index += count
            } else {
                name = Self.commonHeaderNames[Int(code) - 1]
            }
            let count = Self.readLength(bytes, at: &index)
            let value = String(decoding: bytes[index..<(index + count)], as: UTF8.self)
            index += count
            result.append(HTTPField(name, value))
        }
        return result
    }

    /// Every event, oldest first.
    var events: [APNsLogEvent] { (firstEvent.map { [$0] } ?? []) + laterEvents }

    /// Records a new outcome.
    mutating func record(_ event: APNsLogEvent) {
        outcome = event.outcome
        if firstEvent == nil { firstEvent = event } else { laterEvents.append(event) }
    }

    /// Records that the request's notification reached `outcome` (SimulatorSupport's ``CaptureLog`` calls it).
    mutating func record(_ outcome: APNsOutcome, at timestamp: Int64, detail: String?) {
        record(APNsLogEvent(outcome: outcome, timestamp: timestamp, detail: detail))
    }

    /// The entry as ``APNsGateway/logEntries(after:limit:)`` reports it: repeated headers joined with `", "`.
    var entry: APNsLogEntry {
        var fields: [String: String] = [:]
        for header in headers {
            if let existing = fields[header.name] {
                fields[header.name] = existing + ", " + header.value
            } else {
                fields[header.name] = header.value
            }
        }
        return APNsLogEntry(
            sequence: sequence, timestamp: timestamp, apnsId: apnsId, method: method, path: path,
            deviceToken: deviceToken, environment: environment, headers: fields,
            payload: String(decoding: bytes[Int(payloadStart)...], as: UTF8.self), payloadTruncated: payloadTruncated,
            status: status, reason: reason?.rawValue, outcome: outcome, events: events)
    }

    private func text(_ start: UInt32, _ end: UInt32) -> String {
        String(decoding: bytes[Int(start)..<Int(end)], as: UTF8.self)
    }

    private static func code(of name: String) -> UInt8? {
        guard let index = commonHeaderNames.firstIndex(of: name) else { return nil }
        return UInt8(index + 1)
    }

    /// A length in 7-bit groups, low group first, the high bit marking that more follow.
    private static func appendLength(_ length: Int, to bytes: inout [UInt8]) {
        var rest = length
        while rest >= 0x80 {
            bytes.append(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
    }

    private static func readLength(_ bytes: [UInt8], at index: inout Int) -> Int {
        var length = 0
        var shift = 0
        while true {
            let byte = bytes[index]
            index += 1
            length |= Int(byte & 0x7F) << shift
            if byte < 0x80 { return length }
            shift += 7
        }
    }
}
