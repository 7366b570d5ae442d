import Foundation
import MailMIME
import MailboxStore
import OpenSSLCrypto
import ServiceMetrics
import SignalDispatch

/// The mailbox's side of MIME: a parsed message as the store keeps it, a delivery's fields as an RFC 5322
/// message (made when asked for), and a stored message's parts as downloads. MailMIME (GMime) does the parsing
/// and the composing.
package enum MessageParts {
    /// How deep and how wide parsing goes (the size limit is the LMTP listener's and the request body's).
    static let limits = MIMELimits()

    /// A message from an MTA for `recipient`: the fields clients show, read from `raw`, which is kept as it is.
    /// A retransmission of the same bytes to the same account stores nothing twice.
    package static func ingested(_ raw: [UInt8], recipient: String, envelopeSender: String) -> NewMessage {
        let parsed = MIMEMessage.parse(raw, limits: limits)
        let from = parsed.from.first.map(\.displayForm) ?? envelopeSender
        var message = NewMessage(
            to: recipient, from: capped(from), subject: capped(parsed.subject), body: parsed.text)
        message.htmlBody = parsed.html
        message.messageID = parsed.messageID
        message.inReplyTo = parsed.inReplyTo
        message.recipients = parsed.to
        message.cc = parsed.cc
        message.sentAt = parsed.sentAt
        message.attachments = parsed.attachments
        message.raw = raw
        message.deduplicates = true
        return message
    }

    /// At most 998 bytes (RFC 5322's line limit, the API's for `from` and `subject`), cut between characters;
    /// the raw message keeps the whole header.
    static func capped(_ text: String) -> String {
        guard text.utf8.count > 998 else { return text }
        var result = ""
        var bytes = 0
        for character in text {
            bytes += character.utf8.count
            if bytes > 998 { break }
            result.append(character)
        }
        return result
    }

    /// A `POST /v1/deliveries` message: its fields as given, with a Message-ID and a date. Its RFC 5322 form is
    /// not made here: `MessageSource.rfc5322` composes it from the stored fields when a client asks for it, so a delivery costs
    /// no MIME work and no blob.
    package static func composed(to: String, from: String, subject: String, body: String) -> NewMessage {
        var message = NewMessage(to: to, from: from, subject: subject, body: body)
        message.messageID = SecureRandom.hex(16) + "@mailboxd.invalid"
        message.sentAt = Date().timeIntervalSince1970.rounded(.down)
        message.recipients = [MailAddress(name: "", address: to)]
        return message
    }

    /// `1`, `2.1`, …: dot-separated numbers without leading zeros, at most 16 levels.
    static func isValidPartID(_ text: String) -> Bool {
        let components = text.split(separator: ".", omittingEmptySubsequences: false)
        return (1...16).contains(components.count)
            && components.allSatisfy { component in
                (1...5).contains(component.utf8.count) && component.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
                    && component.first != "0"
            }
    }

    /// The part's decoded bytes, with a content type safe to send as a header.
    static func part(_ partID: String, of raw: [UInt8]) -> MIMEPartContent? {
        guard var part = MIMEMessage.part(partID, of: raw, limits: limits) else { return nil }
        let halves = part.contentType.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        if halves.count != 2 || halves.contains(where: { !isToken($0) }) {
            part.contentType = "application/octet-stream"
        }
        // Text keeps its own charset: say which, so the client can decode it.
        if part.contentType.hasPrefix("text/"), let charset = part.charset, isToken(charset.lowercased().utf8) {
            part.contentType += "; charset=\(charset.lowercased())"
        }
        return part
    }

    /// An RFC 2045 token (lowercase): safe to put in a header as it is.
    static func isToken(_ bytes: some Collection<UInt8>) -> Bool {
        !bytes.isEmpty && bytes.count <= 127
            && bytes.allSatisfy { byte in
                (0x30...0x39).contains(byte) || (0x61...0x7A).contains(byte) || Array("!#$&-^_.+".utf8).contains(byte)
            }
    }

    /// `attachment; filename="…"; filename*=UTF-8''…` (RFC 6266): an ASCII fallback and the exact name.
    static func contentDisposition(filename: String?, partID: String) -> String {
        let name = filename.flatMap { $0.isEmpty ? nil : $0 } ?? "part-\(partID)"
        let fallback = String(
            name.unicodeScalars.prefix(200).map { scalar -> Character in
                scalar.isASCII && scalar.value >= 0x20 && scalar != "\"" && scalar != "\\" && scalar.value != 0x7F
                    ? Character(scalar) : "_"
            })
        var encoded = ""
        // At most 200 characters, cut between characters so the percent-encoding stays valid UTF-8.
        for byte in String(name.prefix(200)).utf8 {
            let unreserved =
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || Array("-._~".utf8).contains(byte)
            encoded += unreserved ? String(UnicodeScalar(byte)) : String(format: "%%%02X", byte)
        }
        return "attachment; filename=\"\(fallback)\"; filename*=UTF-8''\(encoded)"
    }
}
