import Foundation

/// Writing IMAP response data: strings as atoms, quoted strings or literals, NIL, lists.
package enum IMAPResponse {
    /// `text` as a quoted string when it can be one, else as a literal.
    static func string(_ text: String?) -> [UInt8] {
        guard let text else { return Array("NIL".utf8) }
        return string(bytes: Array(text.utf8))
    }

    /// `bytes` as a quoted string when they can be one (short, printable ASCII), else as a literal.
    static func string(bytes: [UInt8]) -> [UInt8] {
        if bytes.count <= 1024, bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) {
            var out: [UInt8] = [UInt8(ascii: "\"")]
            for byte in bytes {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { out.append(UInt8(ascii: "\\")) }
                out.append(byte)
            }
            out.append(UInt8(ascii: "\""))
            return out
        }
        return literal(bytes)
    }

    /// `{N}` CRLF and the bytes.
    static func literal(_ bytes: [UInt8]) -> [UInt8] { Array("{\(bytes.count)}\r\n".utf8) + bytes }

    /// An INTERNALDATE (`"05-Dec-2026 19:01:31 +0000"`).
    static func internalDate(_ seconds: Double) -> String {
        let (date, time) = utcParts(seconds)
        return "\"\(two(date.tm_mday))-\(months[Int(date.tm_mon)])-\(date.tm_year + 1900) \(time) +0000\""
    }

    /// An RFC 5322 date (`Sat, 05 Dec 2026 19:01:31 +0000`), as an ENVELOPE's date, written without a formatter: a
    /// FETCH writes one per message.
    package static func rfc5322Date(_ seconds: Double) -> String {
        let (date, time) = utcParts(seconds)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        return "\(days[Int(date.tm_wday)]), \(two(date.tm_mday)) \(months[Int(date.tm_mon)]) \(date.tm_year + 1900) "
            + "\(time) +0000"
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    private static func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }

    /// The UTC calendar fields of `seconds` since 1970, and its `HH:MM:SS`.
    private static func utcParts(_ seconds: Double) -> (tm, String) {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        return (parts, "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))")
    }

    /// An ENVELOPE (RFC 9051 section 7.5.2).
    static func envelope(_ envelope: IMAPEnvelope) -> [UInt8] {
        func addresses(_ list: [MailAddress]) -> [UInt8] {
            guard !list.isEmpty else { return Array("NIL".utf8) }
            var out: [UInt8] = [UInt8(ascii: "(")]
            for address in list {
                let at = address.address.lastIndex(of: "@")
                let mailbox = at.map { String(address.address[..<$0]) } ?? address.address
                let host = at.map { String(address.address[address.address.index(after: $0)...]) }
                out += Array("(".utf8) + string(address.name.isEmpty ? nil : address.name) + Array(" NIL ".utf8)
                out += string(mailbox) + Array(" ".utf8) + string(host) + Array(")".utf8)
            }
            return out + [UInt8(ascii: ")")]
        }
        let from = addresses(envelope.from)
        var out: [UInt8] = Array("(".utf8)
        out += string(envelope.date) + [0x20] + string(envelope.subject) + [0x20]
        out += from + [0x20] + from + [0x20] + from + [0x20]
        out += addresses(envelope.to) + [0x20] + addresses(envelope.cc) + Array(" NIL ".utf8)
        out += string(envelope.inReplyTo) + [0x20] + string(envelope.messageID) + Array(")".utf8)
        return out
    }

    /// The flags of a message as a list: the system flags, then its keywords (`$answered` and `$draft` are
    /// `\Answered` and `\Draft`).
    static func flags(_ message: IMAPMessageState, seen: Bool? = nil, deleted: Bool) -> String {
        var flags: [String] = []
        if seen ?? message.seen { flags.append("\\Seen") }
        if message.flagged { flags.append("\\Flagged") }
        if deleted { flags.append("\\Deleted") }
        flags += message.keywords.map(IMAPFlag.name)
        return "(" + flags.joined(separator: " ") + ")"
    }
}

/// IMAP's flags as the store keeps them: `\Seen` and `\Flagged` are its two flags, `\Answered` and `\Draft` the
/// keywords `$answered` and `$draft` (JMAP's names), a keyword itself lowercased; `\Deleted` is the session's.
enum IMAPFlag {
    /// What a flag named in STORE, APPEND or SEARCH is: a flag the store keeps as a keyword (lowercased, the system
    /// ones as JMAP names them), `nil` for `\Seen`, `\Flagged`, `\Deleted` and `\Recent`, which are not keywords, or
    /// an unknown system flag.
    static func keyword(_ flag: String) -> String? {
        let lowered = flag.lowercased()
        switch lowered {
        case "\\answered": return "$answered"
        case "\\draft": return "$draft"
        default: return lowered.hasPrefix("\\") ? nil : lowered
        }
    }

    /// The flag a kept keyword is in IMAP.
    static func name(_ keyword: String) -> String {
        switch keyword {
        case "$answered": "\\Answered"
        case "$draft": "\\Draft"
        default: keyword
        }
    }
}
