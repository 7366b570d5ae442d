import Foundation
import MailMIME
import Testing

/// MIME parsing and composing with GMime, on a corpus of real-world-shaped messages (`Corpus/`).
@Suite("MIME")
struct MIMEMessageTests {
    static func corpus(_ name: String) throws -> [UInt8] {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Corpus")
        return Array(try Data(contentsOf: folder.appendingPathComponent(name)))
    }

    @Test func alternativeGivesTextHTMLAndDecodedHeaders() throws {
        let m = MIMEMessage.parse(try Self.corpus("alternative.eml"))
        #expect(m.subject == "Café tomorrow?")
        #expect(m.from == [MailAddress(name: "Zoë Adámek", address: "zoe@example.org")])
        #expect(m.to == [MailAddress(name: "Alice", address: "alice@example.test")])
        #expect(m.messageID == "alt-1@example.org")
        #expect(m.inReplyTo == "prev-9@example.test")
        #expect(m.sentAt == 1_796_022_900)  // 2026-11-30 07:15:00 UTC
        #expect(m.text == "Shall we meet at the café at ten?\n— Zoë")
        #expect(m.html?.contains("<b>café</b>") == true)
        #expect(m.attachments.isEmpty)
        #expect(m.isComplete)
    }

    @Test func nestedMixedListsEveryAttachmentWithItsPathAndDecodedSize() throws {
        let raw = try Self.corpus("mixed-nested.eml")
        let m = MIMEMessage.parse(raw)
        #expect(m.subject == "Quarterly report")
        #expect(m.text == "The report is attached.")
        #expect(m.html?.contains("cid:logo@x") == true)
        #expect(m.to.map(\.address) == ["alice@example.test", "bob@example.test"])
        #expect(m.cc.map(\.address) == ["carol@example.test", "dave@example.test"])  // a group, flattened
        #expect(
            m.attachments == [
                MailAttachment(partId: "1.2.2", filename: "logo.png", type: "image/png", size: 108),
                MailAttachment(partId: "2", filename: "Q4 résumé.pdf", type: "application/pdf", size: 1033),
                MailAttachment(
                    partId: "3", filename: nil, type: "message/rfc822",
                    size: MIMEMessage.part("3", of: raw)?.bytes.count ?? -1),
            ])
        let pdf = try #require(MIMEMessage.part("2", of: raw))
        #expect(pdf.bytes == Array("%PDF-1.4\n".utf8) + (0..<4).flatMap { _ in (0...255).map(UInt8.init) })
        #expect(pdf.contentType == "application/pdf")
        let forwarded = try #require(MIMEMessage.part("3", of: raw))
        #expect(MIMEMessage.parse(forwarded.bytes).subject == "Forwarded")
        #expect(MIMEMessage.part("4", of: raw) == nil)
        #expect(MIMEMessage.part("1.1", of: raw)?.bytes == Array("The report is attached.".utf8))
    }

    @Test func latin1EightBitBodyAndUndeclaredHeaderAreUTF8() throws {
        let m = MIMEMessage.parse(try Self.corpus("latin1-8bit.eml"))
        #expect(m.text == "Grüße aus Köln, schöne Äpfel.\n")
        #expect(m.subject == "Äpfel und Birnen")
        #expect(m.from.first?.name == "Jörg")
    }

    @Test func shiftJISBodyAndISO2022JPSubjectAreDecoded() throws {
        let m = MIMEMessage.parse(try Self.corpus("shift-jis.eml"))
        #expect(m.text == "日本語のテキストです。\nよろしくお願いします。\n")
        #expect(m.subject == "会議の件")
        #expect(m.from.first?.name == "山田")
    }

    @Test func foldedAndMalformedHeadersGiveWhatCanBeRead() throws {
        let m = MIMEMessage.parse(try Self.corpus("folded-malformed.eml"))
        #expect(m.subject == "a subject that is folded over two lines and a third")
        #expect(m.sentAt == nil)
        #expect(m.to.map(\.address) == ["alice@example.test"])
        #expect(m.text.contains("No boundary was declared"))
    }

    @Test func htmlOnlyIsReducedToTextForTheBody() throws {
        let m = MIMEMessage.parse(try Self.corpus("html-only.eml"))
        #expect(m.text == "Hello there\nPrices < 5€ & more!\none\ntwo")
        #expect(m.html?.hasPrefix("<html>") == true)
    }

    @Test func deepNestingStopsAtTheLimitWithoutACrash() {
        var text = "From: a@example.org\r\nSubject: deep\r\nMIME-Version: 1.0\r\n"
        let depth = 200
        for level in 0..<depth {
            text += "Content-Type: multipart/mixed; boundary=\"b\(level)\"\r\n\r\n--b\(level)\r\n"
        }
        text += "Content-Type: text/plain\r\n\r\ninnermost\r\n"
        for level in (0..<depth).reversed() { text += "--b\(level)--\r\n" }
        let m = MIMEMessage.parse(Array(text.utf8), limits: MIMELimits(maxParts: 500, maxDepth: 16))
        #expect(m.subject == "deep")
        #expect(!m.isComplete)
        #expect(m.text.isEmpty)
    }

    @Test func manyPartsStopAtThePartLimit() {
        var text = "From: a@example.org\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n"
        for index in 0..<50 { text += "--b\r\nContent-Type: application/octet-stream\r\n\r\npart \(index)\r\n" }
        text += "--b--\r\n"
        let m = MIMEMessage.parse(Array(text.utf8), limits: MIMELimits(maxParts: 11, maxDepth: 16))
        #expect(m.attachments.count == 10)
        #expect(!m.isComplete)
    }

    @Test func bytesThatAreNoMessageStillParse() {
        var generator = SystemRandomNumberGenerator()
        for length in [0, 1, 2, 17, 4096] {
            let noise = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            _ = MIMEMessage.parse(noise)
            _ = MIMEMessage.part("1", of: noise)
        }
        #expect(MIMEMessage.parse([]).subject == "")
    }

    @Test func composedMessageParsesBackToItsFields() {
        let raw = MIMEMessage.compose(
            from: "Zoë <zoe@example.org>", to: "alice", subject: "Grüße — 今日は", body: "Line one\nSchöne Grüße\n",
            date: 1_796_022_900, messageID: "m-1@mailboxd.invalid")
        let text = String(decoding: raw, as: UTF8.self)
        #expect(raw.allSatisfy { $0 < 0x80 })  // 7-bit: non-ASCII is encoded
        #expect(text.contains("\r\n") && !text.replacingOccurrences(of: "\r\n", with: "").contains("\n"))
        let m = MIMEMessage.parse(raw)
        #expect(m.subject == "Grüße — 今日は")
        #expect(m.from == [MailAddress(name: "Zoë", address: "zoe@example.org")])
        #expect(m.text == "Line one\nSchöne Grüße\n")
        #expect(m.messageID == "m-1@mailboxd.invalid")
        #expect(m.sentAt == 1_796_022_900)
    }

    @Test func aBareAddressReadsAsGMimeReadsIt() {
        let bare = [
            "sender1@example.com", "first.last+tag@mail.example.co.uk", "a@b", "x_y-z@host-1.example", "A9@EXAMPLE.COM",
        ]
        for address in bare {
            #expect(MIMEMessage.parsedAddresses(address) == MIMEMessage.libraryParsedAddresses(address), "\(address)")
            #expect(MIMEMessage.parsedAddresses(address) == [MailAddress(name: "", address: address)], "\(address)")
        }
        // Anything else is GMime's to read: names, lists, comments, quotes, dots out of place, encoded words.
        let other = [
            "Alice <alice@example.com>", "a@b, c@d", "a@b (comment)", "\"a b\"@example.com", ".a@b", "a.@b", "a..b@c",
            "a@b.", "a@.b", "a@@b", "@b", "a@", "", "=?utf-8?q?A?= <a@b>", "a @b", "a@b_c", "a@b+c", "ä@b",
        ]
        for text in other {
            #expect(MIMEMessage.parsedAddresses(text) == MIMEMessage.libraryParsedAddresses(text), "\(text)")
        }
    }

    @Test func messageIDsAreTheFirstBracketedID() throws {
        let raw = Array(
            "From: a@example.org\r\nMessage-ID: <m@x>\r\nIn-Reply-To: Your message of Monday <orig@example.net>\r\n\r\nb\r\n"
                .utf8)
        let m = MIMEMessage.parse(raw)
        #expect(m.messageID == "m@x")
        #expect(m.inReplyTo == "orig@example.net")
    }

    @Test func aTextPartKeepsItsCharsetName() throws {
        let part = try #require(MIMEMessage.part("1", of: try Self.corpus("shift-jis.eml")))
        #expect(part.charset?.lowercased() == "shift_jis")
        #expect(part.contentType == "text/plain")
    }

    @Test(arguments: [
        ("<p>a</p><p>b</p>", "a\nb"), ("x &amp;&#x41;&#66; y", "x &AB y"), ("<style>p{}</style>t", "t"),
        ("a<br>b", "a\nb"), ("&unknown; &#xZZ;", "&unknown; &#xZZ;"), ("<", ""), ("a  \n  b", "a b"),
    ])
    func htmlReduction(html: String, text: String) {
        #expect(HTMLText.reduce(html) == text)
    }
}
