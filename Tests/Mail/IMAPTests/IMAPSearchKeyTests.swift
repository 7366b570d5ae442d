import Testing

@testable import IMAP

/// SEARCH's keys parsed into a tree and matched against a message's state and content; APPEND's date-time.
@Suite struct IMAPSearchKeyTests {
    static func keys(_ text: String) throws -> IMAPSearchKey {
        let command = try IMAPCommand.parse(Array("a SEARCH \(text)\r\n".utf8))
        return try IMAPSearchKey.parse(command.arguments)
    }

    /// A message whose subject is an encoded word and whose body is base64: the store's decoded fields are what a
    /// person would search for.
    static let content = IMAPMessageContent(
        raw: Array(
            ("From: =?utf-8?q?J=C3=BCrgen?= <j@example.com>\r\nTo: alice@example.com\r\n"
                + "Subject: =?utf-8?q?Gr=C3=BC=C3=9Fe?=\r\nX-Priority: 1\r\nContent-Transfer-Encoding: base64\r\n\r\n"
                + "aGVsbG8gd29ybGQ=\r\n").utf8),
        receivedAt: 1_796_493_691,  // 2026-12-05 18:01:31 UTC
        envelope: IMAPEnvelope(
            date: nil, subject: "Grüße", from: [MailAddress(name: "Jürgen", address: "j@example.com")],
            to: [MailAddress(name: "", address: "alice@example.com")], cc: [], inReplyTo: nil, messageID: nil),
        text: "hello world", sentAt: 1_796_400_000)  // 2026-12-04
    static let state = IMAPMessageState(uid: 7, id: "m7", seen: false, flagged: true, modseq: 12)
    static let context = IMAPSearchKey.Context(deleted: [], messageCount: 3, largestUID: 9)

    func matches(_ text: String) throws -> Bool {
        try Self.keys(text).matches(Self.state, number: 2, content: Self.content, in: Self.context)
    }

    @Test func contentKeysMatchTheDecodedFieldsAndTheRawBytes() throws {
        #expect(try matches("SUBJECT \"grüße\""))
        #expect(try matches("FROM \"jürgen\""))
        #expect(try matches("FROM J@EXAMPLE.COM"))
        #expect(try matches("TO alice"))
        #expect(try !matches("CC alice"))
        #expect(try matches("BODY \"HELLO world\""), "the decoded text, whatever the transfer encoding")
        #expect(try matches("TEXT x-priority"), "TEXT reads the header too")
        #expect(try matches("HEADER X-Priority 1"))
        #expect(try matches("HEADER x-priority \"\""), "an empty value: the field is there")
        #expect(try !matches("HEADER X-Spam \"\""))
        #expect(try matches("LARGER 10 SMALLER 10000"))
        #expect(try !matches("LARGER 10000"))
    }

    @Test func datesCompareWholeDays() throws {
        #expect(try matches("ON 5-Dec-2026 SINCE 5-Dec-2026 BEFORE 6-Dec-2026"))
        #expect(try !matches("BEFORE 5-Dec-2026"))
        #expect(try matches("SENTON 4-Dec-2026 SENTBEFORE 5-Dec-2026"))
        #expect(IMAPSearchKey.parseDate("1-Feb-1994") == 8797)
        #expect(IMAPSearchKey.parseDate("31-Foo-2026") == nil)
        #expect(IMAPSearchKey.parseDate("32-Jan-2026") == nil)
        #expect(IMAPSession.parseDateTime("05-Dec-2026 19:01:31 +0100") == 1_796_493_691)
        #expect(IMAPSession.parseDateTime(" 5-Dec-2026 18:01:31 +0000") == 1_796_493_691)
        #expect(IMAPSession.parseDateTime("05-Dec-2026 25:01:31 +0000") == nil)
    }

    @Test func stateKeysNeedNoContentAndCombine() throws {
        let flagged = try Self.keys("OR SEEN (FLAGGED UID 5:7) NOT 3")
        #expect(!flagged.needsContent)
        #expect(flagged.matches(Self.state, number: 2, content: nil, in: Self.context))
        #expect(try Self.keys("NOT SUBJECT x").needsContent)
        #expect(try !Self.keys("SUBJECT \"grüße\"").matches(Self.state, number: 2, content: nil, in: Self.context))
        #expect(try Self.keys("MODSEQ 12").usesModseq)
        #expect(try Self.keys("NEW").matches(Self.state, number: 2, content: nil, in: Self.context) == false)
    }

    @Test func malformedKeysAreRefusedWithAReason() {
        for text in ["SINCE 31-Foo-2026", "OR SEEN", "HEADER Subject", "LARGER -1", "UID x", "FRM alice", "()"] {
            #expect(throws: IMAPSearchKey.ParseError.self, "\(text)") { try Self.keys(text) }
        }
    }
}
