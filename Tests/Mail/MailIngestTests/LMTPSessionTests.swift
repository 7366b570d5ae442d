import MailIngest
import Testing

/// The LMTP session command by command, without a socket: a small driver plays the socket loop, answering
/// lookups from a set of known users and deliveries with a fixed result.
@Suite("LMTP session")
struct LMTPSessionTests {
    /// Plays the socket loop: collects replies, answers lookups and deliveries, records what was delivered.
    struct Driver {
        var session: LMTPSession
        var users: Set<String> = ["alice@example.com", "bob@example.com"]
        var result = LMTPSession.DeliveryResult.stored
        var replies = ""
        var delivered: [(LMTPSession.Envelope, [UInt8])] = []
        var lookups: [String] = []
        var closed = false

        init(_ configuration: LMTPSession.Configuration = .init(hostname: "mailbox.test")) {
            session = LMTPSession(configuration: configuration)
        }

        mutating func send(_ text: String) { run(session.receive(Array(text.utf8))) }

        mutating func run(_ actions: [LMTPSession.Action]) {
            for action in actions {
                switch action {
                case .send(let text): replies += text
                case .close: closed = true
                case .verifyRecipient(let address):
                    lookups.append(address)
                    run(session.recipientVerified(users.contains(address) ? .exists : .unknown))
                case .deliver(let envelope, let message):
                    delivered.append((envelope, message))
                    run(session.delivered(envelope.recipients.map { _ in result }))
                }
            }
        }

        /// The replies since the last call, as lines without CRLF.
        mutating func take() -> [String] {
            defer { replies = "" }
            return replies.split(separator: "\r\n", omittingEmptySubsequences: true).map(String.init)
        }
    }

    @Test func greetingAndLHLOAdvertiseTheExtensions() {
        var d = Driver()
        #expect(d.session.greeting == "220 mailbox.test LMTP ready\r\n")
        d.send("LHLO mta.example.com\r\n")
        #expect(
            d.take() == [
                "250-mailbox.test", "250-PIPELINING", "250-ENHANCEDSTATUSCODES", "250-8BITMIME", "250-SMTPUTF8",
                "250 SIZE 26214400",
            ])
    }

    @Test func heloAndEhloAreRefused() {
        var d = Driver()
        d.send("HELO mta\r\nEHLO mta\r\nMAIL FROM:<a@b>\r\n")
        #expect(
            d.take() == [
                "500 5.5.1 This is an LMTP server: use LHLO", "500 5.5.1 This is an LMTP server: use LHLO",
                "503 5.5.1 LHLO first",
            ])
    }

    @Test func oneReplyPerAcceptedRecipientInOrderAfterData() {
        var d = Driver()
        d.send("LHLO mta\r\n")
        _ = d.take()
        d.send("MAIL FROM:<sender@example.org>\r\n")
        d.send("RCPT TO:<bob@example.com>\r\nRCPT TO:<nobody@example.com>\r\nRCPT TO:<alice@example.com>\r\n")
        d.send("DATA\r\n")
        d.send("Subject: hi\r\n\r\nHello.\r\n.\r\n")
        #expect(
            d.take() == [
                "250 2.1.0 Sender OK", "250 2.1.5 Recipient OK", "550 5.1.1 No such user here",
                "250 2.1.5 Recipient OK", "354 Start mail input; end with <CRLF>.<CRLF>",
                "250 2.0.0 <bob@example.com> delivered", "250 2.0.0 <alice@example.com> delivered",
            ])
        #expect(d.delivered.count == 1)
        #expect(
            d.delivered.first?.0
                == .init(sender: "sender@example.org", recipients: ["bob@example.com", "alice@example.com"]))
        #expect(d.delivered.first.map { String(decoding: $0.1, as: UTF8.self) } == "Subject: hi\r\n\r\nHello.\r\n")
    }

    @Test func pipelinedCommandsWaitForEachLookupAndStayInOrder() {
        var d = Driver()
        // Everything in one packet, as a PIPELINING client sends it.
        d.send(
            "LHLO mta\r\nMAIL FROM:<s@x>\r\nRCPT TO:<alice@example.com>\r\nRCPT TO:<bob@example.com>\r\nDATA\r\n"
                + "Body\r\n.\r\nQUIT\r\n")
        let replies = d.take()
        #expect(replies.count == 13)
        #expect(
            Array(replies.dropFirst(6)) == [
                "250 2.1.0 Sender OK", "250 2.1.5 Recipient OK", "250 2.1.5 Recipient OK",
                "354 Start mail input; end with <CRLF>.<CRLF>", "250 2.0.0 <alice@example.com> delivered",
                "250 2.0.0 <bob@example.com> delivered", "221 2.0.0 mailbox.test closing connection",
            ])
        #expect(replies.last == "221 2.0.0 mailbox.test closing connection")
        #expect(d.lookups == ["alice@example.com", "bob@example.com"])
        #expect(d.closed)
    }

    @Test func dataWithoutAcceptedRecipientsIs503() {
        var d = Driver()
        d.send("LHLO mta\r\nMAIL FROM:<s@x>\r\nRCPT TO:<nobody@x>\r\nDATA\r\n")
        #expect(d.take().suffix(2) == ["550 5.1.1 No such user here", "503 5.5.1 No valid recipients"])
        d.send("DATA\r\n")
        #expect(d.take() == ["503 5.5.1 No valid recipients"], "still in the transaction, still no recipient")
    }

    /// Text pipelined after a DATA that is refused is the client's own commands, answered in order within its own
    /// transaction: the same answers however the input is cut (the fuzzer's `lmtp` invariant).
    @Test func textAfterARefusedDataIsReadAsTheClientsCommandsWhateverTheCut() {
        let input =
            "LHLO mta\r\nMAIL FROM:<s@x>\r\nRCPT TO:<nobody@x>\r\nDATA\r\nMAIL FROM:<other@x>\r\n"
            + "RCPT TO:<alice@example.com>\r\nDATA\r\ntext\r\n.\r\n"
        var whole = Driver()
        whole.send(input)
        var pieces = Driver()
        for byte in input.utf8 { pieces.run(pieces.session.receive([byte])) }
        #expect(whole.take() == pieces.take())
        #expect(whole.delivered.map(\.0) == [LMTPSession.Envelope(sender: "s@x", recipients: ["alice@example.com"])])
        #expect(pieces.delivered.map(\.0) == whole.delivered.map(\.0))
    }

    @Test func dotStuffingIsUndoneAndOnlyCRLFDotCRLFEndsTheMessage() {
        var d = Driver()
        d.send("LHLO mta\r\nMAIL FROM:<s@x>\r\nRCPT TO:<alice@example.com>\r\nDATA\r\n")
        _ = d.take()
        // A bare-LF dot line is text: "\n.\n" must not end DATA (no SMTP smuggling), and "..x" is ".x".
        d.send("line one\n.\nMAIL FROM:<evil@x>\r\n..leading dot\r\n.\r\n")
        #expect(d.take() == ["250 2.0.0 <alice@example.com> delivered"])
        #expect(
            d.delivered.first.map { String(decoding: $0.1, as: UTF8.self) }
                == "line one\n.\nMAIL FROM:<evil@x>\r\n.leading dot\r\n")
        #expect(d.delivered.count == 1)
    }

    @Test func theEndOfDataMayArriveInAnySplit() {
        let text = "LHLO mta\r\nMAIL FROM:<s@x>\r\nRCPT TO:<alice@example.com>\r\nDATA\r\nA\r\nB\r\n.\r\n"
        for cut in 1..<text.utf8.count {
            var d = Driver()
            let bytes = Array(text.utf8)
            d.run(d.session.receive(bytes[..<cut]))
            d.run(d.session.receive(bytes[cut...]))
            #expect(d.delivered.map { String(decoding: $0.1, as: UTF8.self) } == ["A\r\nB\r\n"], "cut at \(cut)")
        }
    }

    @Test func oversizeMessagesGet552ForEachRecipientAndNothingIsStored() {
        var d = Driver(.init(hostname: "m", maxMessageBytes: 10))
        d.send("LHLO mta\r\nMAIL FROM:<s@x> SIZE=11\r\n")
        #expect(d.take().last == "552 5.3.4 Message size exceeds the limit of 10 bytes")
        d.send("MAIL FROM:<s@x>\r\nRCPT TO:<alice@example.com>\r\nRCPT TO:<bob@example.com>\r\nDATA\r\n")
        _ = d.take()
        d.send("0123456789\r\nmore\r\n.\r\n")
        #expect(
            d.take() == [
                "552 5.3.4 Message exceeds the size limit of 10 bytes",
                "552 5.3.4 Message exceeds the size limit of 10 bytes",
            ])
        #expect(d.delivered.isEmpty)
        d.send("MAIL FROM:<s@x>\r\n")
        #expect(d.take() == ["250 2.1.0 Sender OK"], "the session goes on")
    }

    @Test func anEndlessLineCannotFillMemory() {
        var d = Driver(.init(hostname: "m", maxMessageBytes: 100_000))
        d.send("LHLO mta\r\nMAIL FROM:<s@x>\r\nRCPT TO:<alice@example.com>\r\nDATA\r\n")
        _ = d.take()
        let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 50_000)
        for _ in 0..<10 { d.run(d.session.receive(chunk)) }  // 500 kB, no CRLF
        d.send("\r\n.\r\n")
        #expect(d.take() == ["552 5.3.4 Message exceeds the size limit of 100000 bytes"])
        #expect(d.delivered.isEmpty)

        var fits = Driver()
        fits.send("LHLO mta\r\nMAIL FROM:<s@x>\r\nRCPT TO:<alice@example.com>\r\nDATA\r\n.")
        for _ in 0..<3 { fits.run(fits.session.receive(chunk)) }  // a 150 kB line that starts with a dot
        fits.send("\r\n.\r\n")
        #expect(fits.delivered.first?.1.count == 150_000 + 2, "a long line's leading dot is removed, as for any line")
        #expect(fits.delivered.first?.1.first == UInt8(ascii: "x"))
    }

    @Test func storageUnavailableIs451PerRecipient() {
        var d = Driver()
        d.result = .storageUnavailable
        d.send("LHLO mta\r\nMAIL FROM:<s@x>\r\nRCPT TO:<alice@example.com>\r\nDATA\r\nx\r\n.\r\n")
        #expect(d.take().last == "451 4.3.0 <alice@example.com> storage unavailable, try again later")
    }

    @Test func limitsHaveTheirReplies() {
        var d = Driver(.init(hostname: "m", maxRecipients: 1, maxCommandLineBytes: 64))
        d.send("LHLO mta\r\nMAIL FROM:<s@x>\r\nRCPT TO:<alice@example.com>\r\nRCPT TO:<bob@example.com>\r\n")
        #expect(d.take().last == "452 4.5.3 Too many recipients")
        d.send(String(repeating: "N", count: 100))
        #expect(d.take() == ["500 5.5.2 Line too long"])
        #expect(d.closed && d.session.isClosed)

        var idle = Driver()
        idle.run(idle.session.timedOut())
        #expect(idle.take() == ["421 4.4.2 mailbox.test timeout, closing the connection"])
        #expect(idle.closed)
    }

    @Test func syntaxErrorsAndSequenceErrors() {
        var d = Driver()
        d.send("LHLO\r\nLHLO mta\r\n")
        #expect(d.take().first == "501 5.5.4 LHLO needs a host name")
        d.send("RCPT TO:<alice@example.com>\r\nMAIL FROM:alice\r\nMAIL FROM:<s@x> BODY=9BIT\r\nMAIL FROM:<s@x> X=1\r\n")
        #expect(
            d.take() == [
                "503 5.5.1 MAIL first", "501 5.5.4 Syntax: MAIL FROM:<address>", "501 5.5.4 BODY is 7BIT or 8BITMIME",
                "555 5.5.4 Unsupported MAIL parameter",
            ])
        // A parameter with no name (found by fuzzing: it used to stop the process) is refused like an unknown one.
        d.send("MAIL FROM:<s@x> =\r\nMAIL FROM:<s@x> =8BITMIME\r\nMAIL FROM:<s@x> SIZE=\r\n")
        #expect(
            d.take() == [
                "555 5.5.4 Unsupported MAIL parameter", "555 5.5.4 Unsupported MAIL parameter",
                "501 5.5.4 SIZE needs a number",
            ])
        d.send(
            "MAIL FROM:<> BODY=8BITMIME SMTPUTF8\r\nMAIL FROM:<s@x>\r\nRCPT TO:<>\r\nBOGUS\r\nNOOP\r\nRSET\r\nDATA\r\n")
        #expect(
            d.take() == [
                "250 2.1.0 Sender OK", "503 5.5.1 Nested MAIL command", "501 5.5.4 Syntax: RCPT TO:<address>",
                "500 5.5.2 Command not recognized", "250 2.0.0 OK", "250 2.0.0 OK", "503 5.5.1 MAIL and RCPT first",
            ])
    }
}
