import Foundation
import JSONText
import MailboxStore
import Testing

@testable import MailboxHTTPAPI

/// The API's message objects are written by hand: valid JSON that reads back as what was stored, whatever the
/// text holds, with absent optionals left out as before.
@Suite("Message JSON")
struct MessageJSONTests {
    /// A stored message (the record has no public initialiser; the store makes them).
    static func record(_ fields: [String: Any]) throws -> MessageRecord {
        var all: [String: Any] = [
            "id": "m1", "mailbox": "inbox", "from": "a@example.org", "to": "alice", "subject": "s", "preview": "p",
            "body": "b", "size": 1, "receivedAt": 1_733_000_000.25, "seen": false, "flagged": true, "modseq": 7,
            "recipients": [], "cc": [],
            "attachments": [], "keywords": [],
        ]
        all.merge(fields) { $1 }
        return try JSONDecoder().decode(MessageRecord.self, from: JSONSerialization.data(withJSONObject: all))
    }

    static func parsed(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    @Test func textOfEveryKindReadsBackAsStored() throws {
        let awkward = "Quote \" backslash \\ slash / tab \t CR \r LF \n NUL \u{0} bell \u{7} Grüße 👋 \u{2028}"
        let record = try Self.record([
            "subject": awkward, "from": "Zoë <zoe@example.org>", "body": awkward, "messageID": "id@x",
            "recipients": [["name": awkward, "address": "alice@example.org"]],
            "cc": [["name": "", "address": "bob@example.org"], ["name": "Carol", "address": "carol@example.org"]],
            "sentAt": 1_733_000_000,
            "attachments": [["partId": "2", "filename": awkward, "type": "image/png", "size": 3]],
            "htmlBody": "<p>\(awkward)</p>",
        ])
        let object = try Self.parsed(MessageJSON(record, includeBody: true, includeHTML: true).json)
        #expect(object["subject"] as? String == awkward)
        #expect(object["body"] as? String == awkward)
        #expect(object["htmlBody"] as? String == "<p>\(awkward)</p>")
        #expect(object["from"] as? String == "Zoë <zoe@example.org>")
        #expect((object["to"] as? [[String: String]]) == [["name": awkward, "address": "alice@example.org"]])
        #expect(
            (object["cc"] as? [[String: String]]) == [
                ["name": "", "address": "bob@example.org"], ["name": "Carol", "address": "carol@example.org"],
            ])
        let attachment = try #require((object["attachments"] as? [[String: Any]])?.first)
        #expect(attachment["filename"] as? String == awkward)
        #expect(attachment["size"] as? Int == 3)
        #expect(object["hasAttachment"] as? Bool == true)
        #expect(object["seen"] as? Bool == false && object["flagged"] as? Bool == true)
        #expect(object["receivedAt"] as? Double == 1_733_000_000.25)
        #expect(object["sentAt"] as? Double == 1_733_000_000)
        #expect(object["messageId"] as? String == "id@x")
        #expect(object["size"] as? Int == 1)
    }

    @Test func absentOptionalsAreLeftOutAndOldMessagesNameTheirAccount() throws {
        let record = try Self.record(["attachments": [["partId": "2", "type": "text/csv", "size": 0]]])
        let text = MessageJSON(record, includeBody: false).json
        let object = try Self.parsed(text)
        for key in ["body", "htmlBody", "sentAt", "messageId", "inReplyTo"] {
            #expect(object[key] == nil, "\(key)")
        }
        #expect(!text.contains("null"))
        #expect((object["attachments"] as? [[String: Any]])?.first?["filename"] == nil)
        // Stored before MIME support: no To header was kept, so `to` is the account it was delivered to.
        #expect((object["to"] as? [[String: String]]) == [["name": "", "address": "alice"]])
        #expect((object["cc"] as? [Any])?.isEmpty == true)
    }

    @Test func pagesHoldTheirMessagesAndTombstones() throws {
        let messages = [try Self.record(["id": "m1"]), try Self.record(["id": "m\"2"])].map {
            MessageJSON($0, includeBody: true)
        }
        let changes = try Self.parsed(
            ChangesResponse(
                oldState: "1:2", newState: "1:5", hasMore: true, created: messages, updated: [],
                destroyed: ["gone", "q\"uote"]
            ).json)
        #expect((changes["created"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["m1", "m\"2"])
        #expect((changes["updated"] as? [Any])?.isEmpty == true)
        #expect(changes["destroyed"] as? [String] == ["gone", "q\"uote"])
        #expect(changes["hasMore"] as? Bool == true && changes["newState"] as? String == "1:5")
        let list = try Self.parsed(MessageListResponse(messages: messages, state: "1:5", nextCursor: nil).json)
        #expect((list["messages"] as? [Any])?.count == 2)
        #expect(list["nextCursor"] == nil && list["state"] as? String == "1:5")
    }

    @Test func quotedIntoBytesWritesWhatQuotedWrites() throws {
        #expect(JSONText.quoted("say \"hi\"\\\n\r\t\u{1}\u{1F}é") == #""say \"hi\"\\\n\r\t\u0001\u001fé""#)
        #expect(JSONText.quoted("plain") == #""plain""#)
        let texts = [
            "", "plain", "say \"hi\"", "back\\slash", "line\nbreak\r\ttab", "\u{0}\u{1}\u{1F}\u{7F}", "Grüße 😀 日本",
            String(repeating: "long text ", count: 100) + "\"",
        ]
        for text in texts {
            var bytes: [UInt8] = Array("[".utf8)
            JSONText.appendQuoted(text, to: &bytes)
            #expect(String(decoding: bytes.dropFirst(), as: UTF8.self) == JSONText.quoted(text))
            bytes += Array("]".utf8)
            #expect(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String] == [text])
        }
    }

    @Test func numbersAreJSONNumbersThatReadBackExactly() throws {
        #expect(JSONText.number(1_733_000_000) == "1733000000")
        #expect(JSONText.number(-3) == "-3")
        #expect(JSONText.number(0) == "0")
        #expect(JSONText.number(.infinity) == "null" && JSONText.number(.nan) == "null")
        for value in [0.1, 1_733_000_000.123456, 1e300, -2.5e-7, 1e15, 123_456_789_012_345.5] {
            let text = JSONText.number(value)
            let back = try JSONSerialization.jsonObject(with: Data("[\(text)]".utf8)) as? [Double]
            #expect(back == [value], "\(text)")
        }
    }
}
