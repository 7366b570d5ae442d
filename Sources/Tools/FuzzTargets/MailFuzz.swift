import Foundation
import MailIngest
import MailMIME

/// Mail from an MTA: the MIME parser and the LMTP session.
enum MailFuzz {
    /// Parsing never crashes, and every attachment the parser lists can be fetched by its part id with the size
    /// it reported.
    static func mime(_ bytes: Data) {
        let raw = [UInt8](bytes)
        let message = MIMEMessage.parse(raw)
        for attachment in message.attachments.prefix(16) {
            guard let part = MIMEMessage.part(attachment.partId, of: raw) else {
                violated("listed part \(attachment.partId) cannot be fetched")
            }
            guard part.bytes.count == attachment.size else {
                violated("part \(attachment.partId) is \(part.bytes.count) bytes, listed as \(attachment.size)")
            }
        }
    }

    /// The session answers the same and delivers the same messages whether the input comes whole or in pieces
    /// (TCP may cut it anywhere), and never delivers to a recipient it did not accept.
    static func lmtp(_ bytes: Data) {
        let input = [UInt8](bytes)
        let whole = transcript(input, chunk: max(1, input.count))
        let pieces = transcript(input, chunk: input.count % 7 + 1)
        guard whole == pieces else { violated("the session's answers depend on how the input was cut") }
    }

    struct Transcript: Equatable {
        var replies = ""
        var delivered: [LMTPSession.Envelope] = []
        var messages: [[UInt8]] = []
    }

    /// Feeds `input` in `chunk`-byte pieces; recipients whose address contains `a` exist, every copy is stored.
    static func transcript(_ input: [UInt8], chunk: Int) -> Transcript {
        var session = LMTPSession(
            configuration: .init(hostname: "fuzz.test", maxMessageBytes: 4096, maxRecipients: 5))
        var result = Transcript()
        var accepted: Set<String> = []
        func run(_ actions: [LMTPSession.Action]) {
            var pending = actions
            while !pending.isEmpty {
                switch pending.removeFirst() {
                case .send(let text): result.replies += text
                case .close: break
                case .verifyRecipient(let address):
                    let exists = address.contains("a")
                    if exists { accepted.insert(address) }
                    pending = session.recipientVerified(exists ? .exists : .unknown) + pending
                case .deliver(let envelope, let message):
                    guard envelope.recipients.allSatisfy(accepted.contains) else {
                        violated("a delivery to a recipient that was not accepted")
                    }
                    result.delivered.append(envelope)
                    result.messages.append(message)
                    pending = session.delivered(envelope.recipients.map { _ in .stored }) + pending
                }
            }
        }
        var offset = 0
        while offset < input.count, !session.isClosed {
            let end = min(input.count, offset + chunk)
            run(session.receive(input[offset..<end]))
            offset = end
        }
        return result
    }
}
