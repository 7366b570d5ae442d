import Foundation
import JSONText
import MailboxStore
import Push
import ServiceMetrics
import SignalDispatch

/// A message as the API returns it. `body` is inline when the message is small (see `inlineBodyLimit`);
/// larger bodies are fetched on demand with `GET /v1/messages/{id}`. Written by hand (`json`): a page of changes
/// holds up to 5,000 of them, and an encoder's boxes were a tenth of a sync's CPU.
struct MessageJSON: JSONTextRepresentable {
    var record: MessageRecord
    var includeBody: Bool
    var includeHTML = false

    init(_ record: MessageRecord, includeBody: Bool, includeHTML: Bool = false) {
        self.record = record
        self.includeBody = includeBody
        self.includeHTML = includeHTML
    }

    /// The object `docs/openapi.yaml` calls `Message`, members in the order they have always come; absent
    /// optionals left out.
    var json: String {
        var object = JSONObjectText()
        object.add("id", record.id)
        object.add("mailbox", record.mailbox.rawValue)
        object.add("from", record.from)
        // Messages stored before MIME support name only the account they were delivered to.
        let to = record.recipients.isEmpty ? [MailAddress(name: "", address: record.to)] : record.recipients
        object.add("to", json: to.json)
        object.add("cc", json: record.cc.json)
        object.add("subject", record.subject)
        object.add("preview", record.preview)
        object.add("size", record.size)
        object.add("receivedAt", record.receivedAt)
        object.add("sentAt", record.sentAt)
        object.add("messageId", record.messageID)
        object.add("inReplyTo", record.inReplyTo)
        object.add("seen", record.seen)
        object.add("flagged", record.flagged)
        object.add("hasAttachment", record.hasAttachment)
        object.add("attachments", json: record.attachments.json)
        object.add("body", includeBody ? record.body : nil)
        object.add("htmlBody", includeHTML ? record.htmlBody : nil)
        return object.json
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

/// `POST /v1/deliveries`' answer, written by hand (one per delivery).
struct DeliveryResponse {
    var id: String
    var state: String

    var json: String {
        var object = JSONObjectText()
        object.add("id", id)
        object.add("state", state)
        return object.json
    }
}

struct MessagePatch: Decodable {
    var seen: Bool?
    var flagged: Bool?
    var mailbox: String?
}

/// `GET /v1/messages`: a page of messages, written by hand as ``MessageJSON`` is.
struct MessageListResponse {
    var messages: [MessageJSON]
    var state: String
    var nextCursor: String?

    var json: String {
        var object = JSONObjectText()
        object.add("messages", json: messages.json)
        object.add("state", state)
        object.add("nextCursor", nextCursor)
        return object.json
    }
}

/// `GET /v1/changes`: what changed since a state, written by hand as ``MessageJSON`` is.
struct ChangesResponse {
    var oldState: String
    var newState: String
    var hasMore: Bool
    var created: [MessageJSON]
    var updated: [MessageJSON]
    var destroyed: [String]

    var json: String {
        var object = JSONObjectText()
        object.add("oldState", oldState)
        object.add("newState", newState)
        object.add("hasMore", hasMore)
        object.add("created", json: created.json)
        object.add("updated", json: updated.json)
        object.add("destroyed", json: JSONText.array(destroyed.lazy.map(JSONText.quoted)))
        return object.json
    }
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
