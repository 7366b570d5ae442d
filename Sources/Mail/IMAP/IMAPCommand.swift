/// One argument of an IMAP command.
package enum IMAPToken: Equatable, Sendable {
    /// An atom (NIL, a flag, a sequence set, a fetch item with its section: `BODY.PEEK[HEADER.FIELDS (TO)]<0.9>`).
    case atom(String)
    /// A quoted string or a literal, as bytes.
    case string([UInt8])
    /// A parenthesized list.
    case list([IMAPToken])

    /// The token as text: an atom or a string (`nil` for a list).
    package var text: String? {
        switch self {
        case .atom(let atom): atom
        case .string(let bytes): String(decoding: bytes, as: UTF8.self)
        case .list: nil
        }
    }
}

/// A parsed command: its tag, its name in upper case and its arguments.
package struct IMAPCommand: Equatable, Sendable {
    package var tag: String
    package var name: String
    package var arguments: [IMAPToken]

    /// Why a command could not be parsed; the tag, when one was read, for the `BAD` answer.
    package struct ParseError: Error, Equatable {
        package var tag: String
        package var message: String
    }

    /// Parses a command framed by ``IMAPCommandReader`` (its final CRLF included).
    package static func parse(_ bytes: [UInt8]) throws(ParseError) -> IMAPCommand {
        var parser = Parser(bytes: bytes)
        let tag = parser.atom(stoppingAt: [])
        guard !tag.isEmpty, !tag.contains("+"), parser.skipSpace() else {
            throw ParseError(tag: tag.isEmpty ? "*" : tag, message: "Expected a tag, a space and a command.")
        }
        let name = parser.atom(stoppingAt: []).uppercased()
        guard !name.isEmpty else { throw ParseError(tag: tag, message: "Expected a command name.") }
        var arguments: [IMAPToken] = []
        do throws(ParseError) {
            while parser.skipSpace() {
                arguments.append(try parser.token(depth: 0))
            }
            guard parser.atLineEnd else { throw ParseError(tag: tag, message: "Unexpected characters.") }
        } catch {
            throw ParseError(tag: tag, message: error.message)
        }
        return IMAPCommand(tag: tag, name: name, arguments: arguments)
    }
}

private struct Parser {
    let bytes: [UInt8]
    var index = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    var atLineEnd: Bool {
        index == bytes.count || (bytes[index] == 0x0D && index + 2 == bytes.count) || (bytes[index] == 0x0A)
    }

    mutating func skipSpace() -> Bool {
        guard index < bytes.count, bytes[index] == 0x20 else { return false }
        index += 1
        return true
    }

    /// An atom's characters (RFC 9051 ATOM-CHAR, plus `]` inside a section): stops at space, parentheses, quotes,
    /// controls; a `[` opens a section read to its `]`, spaces and lists included.
    mutating func atom(stoppingAt extra: Set<UInt8>) -> String {
        let start = index
        var depth = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "[") { depth += 1 }
            if byte == UInt8(ascii: "]") {
                if depth == 0 { break }
                depth -= 1
                index += 1
                continue
            }
            if depth > 0 {
                if byte < 0x20 { break }
                index += 1
                continue
            }
            if byte <= 0x20 || byte >= 0x7F || byte == UInt8(ascii: "(") || byte == UInt8(ascii: ")")
                || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "{") || extra.contains(byte)
            {
                break
            }
            index += 1
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    mutating func token(depth: Int) throws(IMAPCommand.ParseError) -> IMAPToken {
        guard index < bytes.count else { throw IMAPCommand.ParseError(tag: "", message: "Missing argument.") }
        switch bytes[index] {
        case UInt8(ascii: "\""):
            return .string(try quoted())
        case UInt8(ascii: "{"), UInt8(ascii: "~"):
            if bytes[index] == UInt8(ascii: "~") {
                guard index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "{") else { break }
                index += 1
            }
            return .string(try literal())
        case UInt8(ascii: "("):
            guard depth < 16 else { throw IMAPCommand.ParseError(tag: "", message: "Lists nested too deeply.") }
            index += 1
            var items: [IMAPToken] = []
            while index < bytes.count, bytes[index] != UInt8(ascii: ")") {
                if !items.isEmpty {
                    guard skipSpace() else { throw IMAPCommand.ParseError(tag: "", message: "Expected a space.") }
                }
                items.append(try token(depth: depth + 1))
            }
            guard index < bytes.count else { throw IMAPCommand.ParseError(tag: "", message: "Unclosed list.") }
            index += 1
            return .list(items)
        default:
            break
        }
        let atom = atom(stoppingAt: [])
        guard !atom.isEmpty else { throw IMAPCommand.ParseError(tag: "", message: "Unexpected character.") }
        return .atom(atom)
    }

    mutating func quoted() throws(IMAPCommand.ParseError) -> [UInt8] {
        index += 1
        var value: [UInt8] = []
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""): return value
            case UInt8(ascii: "\\"):
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") || bytes[index] == UInt8(ascii: "\\")
                else { throw IMAPCommand.ParseError(tag: "", message: "Bad escape in a quoted string.") }
                value.append(bytes[index])
                index += 1
            case 0x0D, 0x0A: throw IMAPCommand.ParseError(tag: "", message: "Unterminated quoted string.")
            default: value.append(byte)
            }
        }
        throw IMAPCommand.ParseError(tag: "", message: "Unterminated quoted string.")
    }

    /// `{N}` or `{N+}`, CRLF, then N bytes (the reader has made sure they are there).
    mutating func literal() throws(IMAPCommand.ParseError) -> [UInt8] {
        index += 1
        let start = index
        while index < bytes.count, (0x30...0x39).contains(bytes[index]) { index += 1 }
        guard let size = Int(String(decoding: bytes[start..<index], as: UTF8.self)) else {
            throw IMAPCommand.ParseError(tag: "", message: "Bad literal.")
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "+") { index += 1 }
        guard index < bytes.count, bytes[index] == UInt8(ascii: "}") else {
            throw IMAPCommand.ParseError(tag: "", message: "Bad literal.")
        }
        index += 1
        if index < bytes.count, bytes[index] == 0x0D { index += 1 }
        guard index < bytes.count, bytes[index] == 0x0A, index + 1 + size <= bytes.count else {
            throw IMAPCommand.ParseError(tag: "", message: "Bad literal.")
        }
        index += 1
        defer { index += size }
        return Array(bytes[index..<index + size])
    }
}
