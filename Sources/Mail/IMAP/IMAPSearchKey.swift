import Foundation

/// A SEARCH's criteria as a tree (RFC 9051 section 6.4.4, RFC 3501 section 6.4.4, MODSEQ from RFC 7162): parsed
/// once, then matched against each message of the selected mailbox. Keys on a message's state (flags, sets, MODSEQ)
/// need nothing more; keys on its content (addresses, subject, headers, text, dates, size) need its
/// ``IMAPMessageContent``, which the session asks the backend for only when ``needsContent``.
indirect enum IMAPSearchKey: Equatable {
    case all
    case nothing
    case seen
    case flagged
    case deleted
    /// A keyword the store keeps (``IMAPFlag/keyword(_:)``: `\Answered` is `$answered`).
    case keyword(String)
    case sequence(IMAPSequenceSet)
    case uid(IMAPSequenceSet)
    case modseq(Int64)
    case not(IMAPSearchKey)
    case or(IMAPSearchKey, IMAPSearchKey)
    case and([IMAPSearchKey])
    /// A header field (in upper case) containing the text; an empty text: the field is present.
    case header(String, String)
    case body(String)
    case text(String)
    /// The day it arrived (INTERNALDATE), in days since 1970-01-01 (UTC).
    case received(Comparison, Int)
    /// The day of its Date header.
    case sent(Comparison, Int)
    case larger(Int)
    case smaller(Int)

    enum Comparison: Equatable {
        case before, on, since
    }

    /// What matching needs to know beyond the message.
    struct Context {
        var deleted: Set<UInt32>
        var messageCount: UInt32
        var largestUID: UInt32
    }

    struct ParseError: Error {
        var message: String
    }

    /// Whether matching reads the message's content.
    var needsContent: Bool {
        switch self {
        case .all, .nothing, .seen, .flagged, .deleted, .keyword, .sequence, .uid, .modseq: false
        case .not(let key): key.needsContent
        case .or(let left, let right): left.needsContent || right.needsContent
        case .and(let keys): keys.contains(where: \.needsContent)
        case .header, .body, .text, .received, .sent, .larger, .smaller: true
        }
    }

    /// Whether a MODSEQ key is in the tree (then `SEARCH` answers with the highest MODSEQ found).
    var usesModseq: Bool {
        switch self {
        case .modseq: true
        case .not(let key): key.usesModseq
        case .or(let left, let right): left.usesModseq || right.usesModseq
        case .and(let keys): keys.contains(where: \.usesModseq)
        default: false
        }
    }

    /// Whether the message (number `number` in the mailbox) matches; `content` is nil when it was not read or the
    /// message is gone, and then no content key matches.
    func matches(
        _ message: IMAPMessageState, number: UInt32, content: IMAPMessageContent?, in context: Context
    ) -> Bool {
        switch self {
        case .all: return true
        case .nothing: return false
        case .seen: return message.seen
        case .flagged: return message.flagged
        case .deleted: return context.deleted.contains(message.uid)
        case .keyword(let keyword): return message.keywords.contains(keyword)
        case .sequence(let set): return set.contains(number, largest: context.messageCount)
        case .uid(let set): return set.contains(message.uid, largest: context.largestUID)
        case .modseq(let value): return message.modseq >= value
        case .not(let key): return !key.matches(message, number: number, content: content, in: context)
        case .or(let left, let right):
            return left.matches(message, number: number, content: content, in: context)
                || right.matches(message, number: number, content: content, in: context)
        case .and(let keys):
            return keys.allSatisfy { $0.matches(message, number: number, content: content, in: context) }
        default:
            guard let content else { return false }
            return matchesContent(content)
        }
    }

    private func matchesContent(_ content: IMAPMessageContent) -> Bool {
        switch self {
        case .header(let name, let value):
            let raw = IMAPMessagePart(content.raw[...]).field(name)
            if value.isEmpty { return raw != nil }
            return [raw, Self.decoded(name, of: content)].contains { $0.map { Self.contains($0, value) } == true }
        case .body(let value):
            return Self.contains(content.text, value)
                || Self.contains(String(decoding: IMAPMessagePart(content.raw[...]).body, as: UTF8.self), value)
        case .text(let value):
            let places =
                [String(decoding: content.raw, as: UTF8.self), content.text]
                + ["SUBJECT", "FROM", "TO", "CC"].compactMap { Self.decoded($0, of: content) }
            return places.contains { Self.contains($0, value) }
        case .received(let comparison, let day):
            return Self.compare(Self.day(of: content.receivedAt), comparison, day)
        case .sent(let comparison, let day):
            guard let sentAt = content.sentAt else { return false }
            return Self.compare(Self.day(of: sentAt), comparison, day)
        case .larger(let size): return content.raw.count > size
        case .smaller(let size): return content.raw.count < size
        default: return false
        }
    }

    /// A field as the store decoded it (encoded words and all), for the fields the envelope keeps.
    private static func decoded(_ name: String, of content: IMAPMessageContent) -> String? {
        func addresses(_ list: [MailAddress]) -> String? {
            guard !list.isEmpty else { return nil }
            return list.map { $0.name.isEmpty ? $0.address : "\($0.name) <\($0.address)>" }.joined(separator: ", ")
        }
        switch name {
        case "SUBJECT": return content.envelope.subject
        case "FROM": return addresses(content.envelope.from)
        case "TO": return addresses(content.envelope.to)
        case "CC": return addresses(content.envelope.cc)
        default: return nil
        }
    }

    /// Substring match without regard to case (RFC 9051: "case-insensitive", for ASCII and beyond).
    private static func contains(_ text: String, _ value: String) -> Bool {
        text.range(of: value, options: .caseInsensitive) != nil
    }

    private static func compare(_ day: Int, _ comparison: Comparison, _ wanted: Int) -> Bool {
        switch comparison {
        case .before: day < wanted
        case .on: day == wanted
        case .since: day >= wanted
        }
    }

    private static func day(of seconds: Double) -> Int { Int((seconds / 86_400).rounded(.down)) }

    // MARK: Parsing

    /// Parses the keys of a SEARCH (after `RETURN (…)` and `CHARSET x`): all of them must match.
    static func parse(_ tokens: [IMAPToken]) throws(ParseError) -> IMAPSearchKey {
        var keys = tokens[...]
        guard !keys.isEmpty else { throw ParseError(message: "BAD SEARCH needs a key") }
        var all: [IMAPSearchKey] = []
        while !keys.isEmpty { all.append(try next(&keys)) }
        return all.count == 1 ? all[0] : .and(all)
    }

    private static func next(_ keys: inout ArraySlice<IMAPToken>) throws(ParseError) -> IMAPSearchKey {
        let token = keys.removeFirst()
        if case .list(let inner) = token {
            guard !inner.isEmpty else { throw ParseError(message: "BAD Empty search list") }
            return try parse(inner)
        }
        guard let key = token.text?.uppercased(), case .atom = token else {
            throw ParseError(message: "BAD Invalid search key")
        }
        func argument() throws(ParseError) -> String {
            guard let value = keys.popFirst()?.text else { throw ParseError(message: "BAD \(key) needs a value") }
            return value
        }
        func number() throws(ParseError) -> Int {
            guard let value = Int(try argument()), value >= 0 else {
                throw ParseError(message: "BAD \(key) needs a number")
            }
            return value
        }
        func date() throws(ParseError) -> Int {
            guard let day = Self.parseDate(try argument()) else {
                throw ParseError(message: "BAD \(key) needs a date like 1-Feb-2026")
            }
            return day
        }
        switch key {
        case "ALL": return .all
        case "SEEN": return .seen
        case "UNSEEN": return .not(.seen)
        case "FLAGGED": return .flagged
        case "UNFLAGGED": return .not(.flagged)
        case "DELETED": return .deleted
        case "UNDELETED": return .not(.deleted)
        case "ANSWERED": return .keyword("$answered")
        case "UNANSWERED": return .not(.keyword("$answered"))
        case "DRAFT": return .keyword("$draft")
        case "UNDRAFT": return .not(.keyword("$draft"))
        // No message is recent (IMAP4rev2 has no \Recent), so NEW, which is RECENT UNSEEN, matches none.
        case "RECENT", "NEW": return .nothing
        case "OLD": return .all
        case "KEYWORD", "UNKEYWORD":
            let flag = try argument()
            // A system flag named as a keyword (`KEYWORD \Seen`) is no keyword: none has it.
            let named: IMAPSearchKey = IMAPFlag.keyword(flag).map { .keyword($0) } ?? .nothing
            return key == "KEYWORD" ? named : .not(named)
        case "NOT":
            guard !keys.isEmpty else { throw ParseError(message: "BAD NOT needs a key") }
            return .not(try next(&keys))
        case "OR":
            guard keys.count >= 2 else { throw ParseError(message: "BAD OR needs two keys") }
            let left = try next(&keys)
            guard !keys.isEmpty else { throw ParseError(message: "BAD OR needs two keys") }
            return .or(left, try next(&keys))
        case "UID":
            guard let set = IMAPSequenceSet(try argument()) else { throw ParseError(message: "BAD UID needs a set") }
            return .uid(set)
        case "MODSEQ":
            // MODSEQ [entry-name entry-type] value (RFC 7162 section 3.1.5).
            if keys.count >= 3, case .string = keys.first { keys.removeFirst(2) }
            guard let value = Int64(try argument()) else { throw ParseError(message: "BAD MODSEQ needs a value") }
            return .modseq(value)
        case "FROM", "TO", "CC", "BCC", "SUBJECT": return .header(key, try argument())
        case "HEADER":
            let name = try argument().uppercased()
            return .header(name, try argument())
        case "BODY": return .body(try argument())
        case "TEXT": return .text(try argument())
        case "BEFORE": return .received(.before, try date())
        case "ON": return .received(.on, try date())
        case "SINCE": return .received(.since, try date())
        case "SENTBEFORE": return .sent(.before, try date())
        case "SENTON": return .sent(.on, try date())
        case "SENTSINCE": return .sent(.since, try date())
        case "LARGER": return .larger(try number())
        case "SMALLER": return .smaller(try number())
        default:
            if let set = IMAPSequenceSet(key) { return .sequence(set) }
            throw ParseError(message: "BAD Unknown search key \(IMAPSession.printable(key))")
        }
    }

    /// `d-Mon-yyyy` (RFC 9051 `date`) as days since 1970-01-01.
    static func parseDate(_ text: String) -> Int? {
        let pieces = text.split(separator: "-")
        let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
        guard pieces.count == 3, let day = Int(pieces[0]), (1...31).contains(day),
            let month = months.firstIndex(of: pieces[1].lowercased()).map({ $0 + 1 }),
            pieces[2].count == 4, let year = Int(pieces[2])
        else { return nil }
        return daysFromCivil(year: year, month: month, day: day)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
