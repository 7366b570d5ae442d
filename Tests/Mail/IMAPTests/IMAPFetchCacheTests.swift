import Testing

@testable import IMAP

/// FETCH's summaries: a listing fetched again is answered from the cache, with the same lines and no read; what a
/// summary cannot answer is still read; one account is never answered from another's entries; the cache stays
/// within its budget and keeps what is in use.
@Suite struct IMAPFetchCacheTests {
    typealias Harness = IMAPSessionTests

    static func content(_ subject: String, parts: Bool) -> IMAPMessageContent {
        let raw =
            parts
            ? "Subject: \(subject)\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\n"
                + "Content-Type: text/plain\r\n\r\nhello\r\n--b\r\nContent-Type: application/pdf; name=\"a.pdf\"\r\n"
                + "Content-Transfer-Encoding: base64\r\n\r\nJVBERg==\r\n--b--\r\n"
            : "Subject: \(subject)\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nline one\r\nline two\r\n"
        return IMAPMessageContent(
            raw: Array(raw.utf8), receivedAt: 1_700_000_000,
            envelope: IMAPEnvelope(
                date: nil, subject: subject, from: [MailAddress(name: "Erin", address: "erin@example.com")], to: [],
                cc: [], inReplyTo: nil, messageID: "<\(subject)@example.com>"))
    }

    static func backend(_ asked: IMAPSessionTests.AskedIDs) -> IMAPSessionTests.Backend {
        IMAPSessionTests.Backend(
            messages: IMAPSessionTests.inbox,
            bodies: [
                "a": content("one", parts: false), "b": content("two", parts: true),
                "c": content("three", parts: false),
            ],
            asked: asked)
    }

    static func selected(
        _ backend: IMAPSessionTests.Backend, cache: IMAPFetchCache, password: String = "pw"
    ) -> IMAPSession {
        var session = IMAPSession(configuration: IMAPSession.Configuration(), backend: backend, fetchCache: cache)
        _ = Harness.run(&session, session.opened())
        #expect(Harness.send(&session, "1 LOGIN u \(password)\r\n").last?.hasPrefix("1 OK") == true)
        #expect(Harness.send(&session, "2 SELECT INBOX\r\n").last?.hasPrefix("2 OK") == true)
        return session
    }

    static let listing = "UID FETCH 1:* (UID FLAGS INTERNALDATE RFC822.SIZE ENVELOPE BODYSTRUCTURE)"

    @Test func aListingFetchedAgainIsAnsweredFromTheCacheWithTheSameLines() {
        let asked = IMAPSessionTests.AskedIDs()
        let cache = IMAPFetchCache(budgetBytes: 1 << 20)
        var session = Self.selected(Self.backend(asked), cache: cache)
        let first = Harness.send(&session, "3 \(Self.listing)\r\n")
        #expect(first.count == 4 && first.last == "3 OK FETCH completed", "\(first)")
        #expect(first[1].contains("ENVELOPE (NIL \"two\" ((\"Erin\" NIL \"erin\" \"example.com\"))"), "\(first[1])")
        #expect(first[1].contains("BODYSTRUCTURE ((\"TEXT\" \"PLAIN\""), "\(first[1])")
        #expect(first[0].contains("RFC822.SIZE 77"), "\(first[0])")
        #expect(asked.ids.withLock { $0 } == ["a", "b", "c"])

        // Again, on this connection and on another of the same account: the same lines, nothing read.
        let again = Harness.send(&session, "4 \(Self.listing)\r\n")
        #expect(Array(again.dropLast()) == Array(first.dropLast()))
        var other = Self.selected(Self.backend(asked), cache: cache)
        #expect(Array(Harness.send(&other, "5 \(Self.listing)\r\n").dropLast()) == Array(first.dropLast()))
        #expect(asked.ids.withLock { $0 } == ["a", "b", "c"])

        // A body section is not in a summary: it is read, and answered.
        let body = Harness.send(&session, "6 UID FETCH 5 (ENVELOPE BODY.PEEK[1])\r\n")
        #expect(body.contains("hello)"), "\(body)")
        #expect(asked.ids.withLock { $0 } == ["a", "b", "c", "b"])
    }

    @Test func anotherAccountIsNeverAnsweredFromTheCache() {
        let asked = IMAPSessionTests.AskedIDs()
        let cache = IMAPFetchCache(budgetBytes: 1 << 20)
        var first = Self.selected(Self.backend(asked), cache: cache)
        _ = Harness.send(&first, "3 \(Self.listing)\r\n")
        var second = Self.selected(Self.backend(asked), cache: cache, password: "pw2")
        _ = Harness.send(&second, "3 \(Self.listing)\r\n")
        #expect(asked.ids.withLock { $0 } == ["a", "b", "c", "a", "b", "c"])
    }

    @Test func theCacheStaysWithinItsBudgetAndKeepsWhatIsInUse() {
        let summary = IMAPMessageSummary(
            content: Self.content("s", parts: false), parsed: IMAPMessagePart(Self.content("s", parts: false).raw[...]))
        let cache = IMAPFetchCache(budgetBytes: summary.cost * 100)
        cache.insert(account: 1, ["kept": summary])
        for round in 0..<50 {
            cache.insert(account: 1, Dictionary(uniqueKeysWithValues: (0..<20).map { ("\(round)-\($0)", summary) }))
            #expect(cache.summaries(account: 1, ids: ["kept"])["kept"] == summary, "round \(round)")
            #expect(cache.count <= 100, "round \(round): \(cache.count) entries")
        }
        #expect(cache.summaries(account: 1, ids: ["0-0"]).isEmpty)
        #expect(IMAPFetchCache(budgetBytes: 0).summaries(account: 1, ids: ["kept"]).isEmpty)
    }
}
