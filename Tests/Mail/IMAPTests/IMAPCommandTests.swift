import Testing

@testable import IMAP

@Suite struct IMAPCommandTests {
    static func frame(_ text: String, maxLine: Int = 1024, maxLiteral: Int = 1024) -> [IMAPCommandReader.Event] {
        var reader = IMAPCommandReader(maxLineBytes: maxLine, maxLiteralBytes: maxLiteral)
        var events: [IMAPCommandReader.Event] = []
        Array(text.utf8).withUnsafeBytes { reader.feed($0) { events.append($0) } }
        return events
    }

    @Test func commandsAreFramedWithTheirLiteralsWhateverTheChunks() {
        let input = "a1 LOGIN {5}\r\nalice {3+}\r\npw!\r\na2 NOOP\r\n"
        var reader = IMAPCommandReader(maxLineBytes: 1024, maxLiteralBytes: 1024)
        var events: [IMAPCommandReader.Event] = []
        for byte in Array(input.utf8) { [byte].withUnsafeBytes { reader.feed($0) { events.append($0) } } }
        #expect(events.count == 3)
        #expect(events[0] == .literalAnnounced, "only the synchronizing literal asks for a continuation")
        guard case .command(let login) = events[1], case .command(let noop) = events[2] else {
            Issue.record("expected two commands: \(events)")
            return
        }
        let parsed = try? IMAPCommand.parse(login)
        #expect(parsed?.name == "LOGIN")
        #expect(parsed?.arguments == [.string(Array("alice".utf8)), .string(Array("pw!".utf8))])
        #expect((try? IMAPCommand.parse(noop))?.name == "NOOP")
    }

    @Test func limitsAreRefusedWithTheTag() {
        #expect(
            Self.frame("t1 \(String(repeating: "x", count: 2000))\r\nt2 NOOP\r\n", maxLine: 100).first
                == .lineTooLong(tag: "t1"))
        #expect(Self.frame("t3 APPEND INBOX {2147483648}\r\n") == [.literalTooLarge(tag: "t3", synchronizing: true)])
        #expect(Self.frame("t4 APPEND INBOX {2000+}\r\n") == [.literalTooLarge(tag: "t4", synchronizing: false)])
    }

    @Test func argumentsParseAsAtomsStringsListsAndSections() throws {
        let command = try IMAPCommand.parse(
            Array("x UID FETCH 1:* (FLAGS BODY.PEEK[HEADER.FIELDS (FROM TO)]<0.100>) \"a \\\"b\\\"\"\r\n".utf8))
        #expect(command.tag == "x")
        #expect(command.name == "UID")
        #expect(command.arguments.count == 4)
        #expect(command.arguments[2] == .list([.atom("FLAGS"), .atom("BODY.PEEK[HEADER.FIELDS (FROM TO)]<0.100>")]))
        #expect(command.arguments[3] == .string(Array("a \"b\"".utf8)))
        #expect(throws: IMAPCommand.ParseError.self) { try IMAPCommand.parse(Array("y LIST (a\r\n".utf8)) }
        #expect(throws: IMAPCommand.ParseError.self) { try IMAPCommand.parse(Array("\r\n".utf8)) }
    }

    @Test func sequenceSetsMatchAndWriteBack() throws {
        let set = try #require(IMAPSequenceSet("1:3,7,9:*"))
        #expect([1, 2, 3, 7, 9, 10].allSatisfy { set.contains($0, largest: 10) })
        #expect(![4, 8].contains { set.contains($0, largest: 10) })
        #expect(IMAPSequenceSet("0") == nil)
        #expect(IMAPSequenceSet("1:x") == nil)
        #expect(IMAPSequenceSet.write([5, 1, 2, 3, 9]) == "1:3,5,9")
        // What is gone: the set less the UIDs present, as ranges (a client without known UIDs knows 1:*).
        let all = try #require(IMAPSequenceSet("1:*"))
        #expect(IMAPSequenceSet.write(ranges: all.subtracting(sortedUIDs: [2, 3, 7], largest: 10)) == "1,4:6,8:10")
        #expect(IMAPSequenceSet.write(ranges: set.subtracting(sortedUIDs: [1, 2, 3, 9, 10], largest: 10)) == "7")
        #expect(all.subtracting(sortedUIDs: [], largest: 4_000_000_000).count == 1)
        #expect(all.subtracting(sortedUIDs: [5], largest: 0).isEmpty)
    }

    /// The gaps found by halving are exactly the numbers a walk over every UID would find, for mailboxes with runs and
    /// gaps of every size and sets of several ranges (a seeded generator, so a failure repeats).
    @Test func whatIsGoneMatchesAWalkOverEveryUID() throws {
        var seed: UInt64 = 0x5eed
        func next(_ bound: Int) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((seed >> 33) % UInt64(bound))
        }
        for _ in 0..<300 {
            var uids: [UInt32] = []
            var uid: UInt32 = UInt32(next(4))
            for _ in 0..<next(60) {
                uid += UInt32(next(3) == 0 ? next(20) + 1 : 1)
                uids.append(uid)
            }
            let largest = (uids.last ?? 0) + UInt32(next(3))
            let ranges = (0..<(next(3) + 1)).map { _ in
                "\(next(Int(largest) + 2) + 1):\(next(3) == 0 ? "*" : String(next(Int(largest) + 5) + 1))"
            }
            let set = try #require(IMAPSequenceSet(ranges.joined(separator: ",")))
            let present = Set(uids)
            let walked =
                largest == 0 ? [] : (1...largest).filter { set.contains($0, largest: largest) && !present.contains($0) }
            let halved = set.subtracting(sortedUIDs: uids, largest: largest).flatMap { Array($0) }
            #expect(halved == walked, "\(ranges) over \(uids), largest \(largest)")
        }
    }

    @Test func listPatternsFollowTheWildcards() {
        #expect(IMAPSession.matches("INBOX", pattern: "*"))
        #expect(IMAPSession.matches("INBOX", pattern: "inbox"))
        #expect(IMAPSession.matches("Archive", pattern: "Ar%"))
        #expect(!IMAPSession.matches("Archive", pattern: "Trash"))
    }

    @Test func aMultipartMessageHasItsPartsAndStructure() {
        let raw = Array(
            ("Subject: s\r\nContent-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n--b1\r\nContent-Type: text/plain\r\n"
                + "\r\nhello\r\n--b1\r\nContent-Type: application/pdf; name=x.pdf\r\n"
                + "Content-Transfer-Encoding: base64\r\n\r\nAAAA\r\n--b1--\r\n").utf8)
        let message = IMAPMessagePart(raw[...])
        #expect(message.parts.count == 2)
        #expect(String(decoding: message.part([1])?.body ?? [], as: UTF8.self) == "hello")
        #expect(message.part([2])?.encoding == "BASE64")
        let structure = String(decoding: message.structure, as: UTF8.self)
        #expect(structure.hasPrefix("((\"TEXT\" \"PLAIN\""))
        #expect(structure.contains("\"MIXED\""))
        let header = IMAPSession.section("BODY[HEADER.FIELDS (SUBJECT)]", of: message)
        let headerText = String(decoding: header?.response ?? [], as: UTF8.self)
        #expect(headerText.hasSuffix("Subject: s\r\n\r\n"))
    }
}

extension IMAPSequenceSet {
    /// ``subtracting(count:largest:uid:)`` over an array of ascending UIDs.
    fileprivate func subtracting(sortedUIDs: [UInt32], largest: UInt32) -> [ClosedRange<UInt32>] {
        subtracting(count: sortedUIDs.count, largest: largest) { sortedUIDs[$0] }
    }
}
