import ConnectionLoop
import Foundation

extension IMAPSession {
    /// `APPEND mailbox [(flags)] [date-time] literal` (RFC 9051 section 6.3.12): the message is filed as a new one,
    /// answered with APPENDUID (RFC 4315). The literal was read whole by the reader, within the message size limit.
    mutating func append(tag: String, arguments: [IMAPToken], account: Int64) -> [LoopAction<IMAPAnswer>] {
        guard arguments.count >= 2, arguments.count <= 4, let mailbox = arguments[0].text,
            case .string(let raw) = arguments[arguments.count - 1]
        else { return [send("\(tag) BAD APPEND needs a mailbox, optional flags and date, and a message literal")] }
        var seen = false
        var flagged = false
        var keywords: [String] = []
        var receivedAt: Double?
        for argument in arguments[1..<(arguments.count - 1)] {
            switch argument {
            case .list(let flags):
                for flag in flags.compactMap(\.text).map({ $0.uppercased() }) {
                    switch flag {
                    case "\\SEEN": seen = true
                    case "\\FLAGGED": flagged = true
                    // \Deleted and \Recent are not kept (see PERMANENTFLAGS): taken and dropped, as RFC 9051 allows.
                    default: if let keyword = IMAPFlag.keyword(flag) { keywords.append(keyword) }
                    }
                }
            case .string(let bytes):
                guard let date = Self.parseDateTime(String(decoding: bytes, as: UTF8.self)) else {
                    return [send("\(tag) BAD Invalid date-time (like \"05-Dec-2026 19:01:31 +0000\")")]
                }
                receivedAt = date
            case .atom:
                return [send("\(tag) BAD APPEND takes flags in parentheses and a quoted date-time")]
            }
        }
        guard !raw.isEmpty else { return [send("\(tag) NO An empty message cannot be filed")] }
        pending = .append(tag: tag, mailbox: mailbox)
        let message = IMAPNewMessage(
            raw: raw, seen: seen, flagged: flagged, receivedAt: receivedAt, keywords: Array(Set(keywords)).sorted())
        let backend = backend
        return [
            .ask { _, answer in
                backend.append(account: account, mailbox: mailbox, message: message) { answer(.moved($0)) }
            }
        ]
    }

    /// `COPY set mailbox` and `UID COPY`: each message filed again in the target as a new one (its bytes, flags and
    /// INTERNALDATE), answered with COPYUID.
    mutating func copy(
        tag: String, uid: Bool, arguments: [IMAPToken], selected: Selected, account: Int64
    ) -> [LoopAction<IMAPAnswer>] {
        guard arguments.count == 2, let set = arguments[0].text.flatMap(IMAPSequenceSet.init),
            let target = arguments[1].text
        else { return [send("\(tag) BAD COPY needs a set and a mailbox")] }
        guard Self.validSequence(set, uid: uid, in: selected.snapshot) else {
            return [send("\(tag) BAD Invalid message sequence number")]
        }
        let messages = Self.messages(in: set, uid: uid, of: selected.snapshot)
        guard !messages.isEmpty else { return [send("\(tag) OK COPY completed (nothing to copy)")] }
        pending = .copy(tag: tag, mailbox: target, copied: messages)
        let backend = backend
        let ids = messages.map(\.id)
        return [.ask { _, answer in backend.copy(account: account, ids: ids, to: target) { answer(.moved($0)) } }]
    }

    /// An IMAP `date-time` (`"05-Dec-2026 19:01:31 +0100"`, the day maybe space-padded) as seconds since 1970.
    static func parseDateTime(_ text: String) -> Double? {
        let pieces = text.trimmingCharacters(in: .whitespaces).split(separator: " ")
        guard pieces.count == 3, let day = IMAPSearchKey.parseDate(String(pieces[0])) else { return nil }
        let time = pieces[1].split(separator: ":").compactMap { Int($0) }
        let zone = pieces[2]
        guard time.count == 3, (0..<24).contains(time[0]), (0..<60).contains(time[1]), (0..<61).contains(time[2]),
            zone.count == 5, let sign = zone.first, sign == "+" || sign == "-",
            let hours = Int(zone.dropFirst().prefix(2)), let minutes = Int(zone.suffix(2))
        else { return nil }
        let offset = (hours * 3600 + minutes * 60) * (sign == "-" ? -1 : 1)
        return Double(day * 86_400 + time[0] * 3600 + time[1] * 60 + time[2] - offset)
    }
}
