import Testing

@testable import MailboxStore

/// The byte-level preview used for ASCII bodies must give exactly what the character-level one gives.
@Suite struct PreviewTests {
    private static let pieces = [
        "a", "b", "Z", "0", " ", ".", "\t", "\n", "\r", "\r\n", "\u{0B}", "\u{0C}", "\n\n\n", "é", "e\u{301}",
        "\u{2028}", "\u{85}", "👍🏽", "日本",
    ]

    @Test func asciiPathMatchesTheCharacterPath() {
        var random = SeededGenerator(state: 20_261_130)
        var asciiAnswers = 0
        for round in 0..<3_000 {
            // Mostly ASCII, so the fast path answers often; sometimes anything.
            let pool = round % 3 == 0 ? Self.pieces : Array(Self.pieces.prefix(13))
            let length = Int.random(in: 0...(round % 2 == 0 ? 60 : 300), using: &random)
            let body = (0..<length).map { _ in pool.randomElement(using: &random)! }.joined()
            let expected = MailboxStore.characterPreview(of: body)
            #expect(MailboxStore.preview(of: body) == expected, "body: \(body.debugDescription)")
            if let fast = MailboxStore.asciiPreview(of: body) {
                asciiAnswers += 1
                #expect(fast == expected, "body: \(body.debugDescription)")
            }
        }
        #expect(asciiAnswers > 1_000)
    }

    @Test func knownCases() {
        let limit = MailboxStore.previewLength
        #expect(MailboxStore.preview(of: "") == "")
        #expect(MailboxStore.preview(of: "\n\nHello\r\n\r\nworld\n") == "Hello world")
        #expect(MailboxStore.preview(of: String(repeating: "x", count: 500)) == String(repeating: "x", count: limit))
        // A combining mark right after the cut joins the last character: the character path decides.
        let combining = String(repeating: "x", count: limit - 1) + "e\u{301}tail"
        #expect(MailboxStore.asciiPreview(of: combining) == nil)
        #expect(MailboxStore.preview(of: combining) == String(repeating: "x", count: limit - 1) + "e\u{301}")
    }
}
