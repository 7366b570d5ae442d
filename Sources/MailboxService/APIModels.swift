import Foundation
import MailboxStore

/// A message as the API returns it. `body` is inline when the message is small (see `inlineBodyLimit`);
/// larger bodies are fetched on demand with `GET /v1/messages/{id}`.
struct MessageJSON: Encodable {
    var id: String
    var mailbox: String
    var from: String
    var to: String
    var subject: String
    var preview: String
    var size: Int
    var receivedAt: Double
    var seen: Bool
    var flagged: Bool
    var body: String?

    init(_ record: MessageRecord, includeBody: Bool) {
        id = record.id
        mailbox = record.mailbox.rawValue
        from = record.from
        to = record.to
        subject = record.subject
        preview = record.preview
        size = record.size
        receivedAt = record.receivedAt
        seen = record.seen
        flagged = record.flagged
        body = includeBody ? record.body : nil
    }
}

struct SessionRequest: Decodable {
    var username: String
    var password: String
    var deviceName: String?
}

struct SessionResponse: Encodable {
    var accessToken: String
    var accountId: String
}

struct DeviceRequest: Decodable {
    var token: String
    var topic: String
    var environment: String
}

struct DeviceResponse: Encodable {
    var token: String
    var alias: String
    var topic: String
    var environment: String
}

struct DeliveryRequest: Decodable {
    var to: String
    var from: String
    var subject: String
    var body: String
}

struct DeliveryResponse: Encodable {
    var id: String
    var state: String
}

struct MessagePatch: Decodable {
    var seen: Bool?
    var flagged: Bool?
    var mailbox: String?
}

struct MessageListResponse: Encodable {
    var messages: [MessageJSON]
    var state: String
    var nextCursor: String?
}

struct ChangesResponse: Encodable {
    var oldState: String
    var newState: String
    var hasMore: Bool
    var created: [MessageJSON]
    var updated: [MessageJSON]
    var destroyed: [String]
}

struct MailboxesResponse: Encodable {
    var mailboxes: [MailboxSummary]
    var state: String
}

struct HealthResponse: Encodable {
    var status: String
    var outboxDepth: Int
}
