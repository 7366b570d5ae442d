import Foundation
import MailboxStore
import Push
import ServiceMetrics
import SignalDispatch

/// A message as the API returns it. `body` is inline when the message is small (see `inlineBodyLimit`);
/// larger bodies are fetched on demand with `GET /v1/messages/{id}`.
struct MessageJSON: Encodable {
    var id: String
    var mailbox: String
    var from: String
    var to: [MailAddress]
    var cc: [MailAddress]
    var subject: String
    var preview: String
    var size: Int
    var receivedAt: Double
    var sentAt: Double?
    var messageId: String?
    var inReplyTo: String?
    var seen: Bool
    var flagged: Bool
    var hasAttachment: Bool
    var attachments: [AttachmentRecord]
    var body: String?
    var htmlBody: String?

    init(_ record: MessageRecord, includeBody: Bool, includeHTML: Bool = false) {
        id = record.id
        mailbox = record.mailbox.rawValue
        from = record.from
        // Messages stored before MIME support name only the account they were delivered to.
        to = record.recipients.isEmpty ? [MailAddress(name: "", address: record.to)] : record.recipients
        cc = record.cc
        subject = record.subject
        preview = record.preview
        size = record.size
        receivedAt = record.receivedAt
        sentAt = record.sentAt
        messageId = record.messageID
        inReplyTo = record.inReplyTo
        seen = record.seen
        flagged = record.flagged
        hasAttachment = record.hasAttachment
        attachments = record.attachments
        body = includeBody ? record.body : nil
        htmlBody = includeHTML ? record.htmlBody : nil
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

/// The answer to `POST /v1/devices`: the device's id, service, alias and signal key (returned only here), and
/// the fields its service names it by (``PushService/registrationFields(of:)``).
struct DeviceResponse: Encodable {
    var id: String?
    var service: String
    var alias: String
    var signalKey: String?
    var serviceFields: [String: String]

    init(_ device: DeviceRecord, serviceFields: [String: String]) {
        id = device.handle
        service = device.address.service.rawValue
        alias = device.alias
        signalKey = device.signalKey?.base64URL
        self.serviceFields = serviceFields
    }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encodeIfPresent(id, forKey: Key(stringValue: "id"))
        try container.encode(service, forKey: Key(stringValue: "service"))
        try container.encode(alias, forKey: Key(stringValue: "alias"))
        try container.encodeIfPresent(signalKey, forKey: Key(stringValue: "signalKey"))
        for (name, value) in serviceFields.sorted(by: { $0.key < $1.key }) {
            try container.encode(value, forKey: Key(stringValue: name))
        }
    }
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

/// `GET /v1/webpush/vapid-public-key`.
struct VAPIDPublicKeyResponse: Encodable {
    /// Base64url of the VAPID key's 65-byte uncompressed point.
    var publicKey: String
}
