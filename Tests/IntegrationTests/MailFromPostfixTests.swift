import Foundation
import OpenSSLCrypto
import TestSupport
import Testing

/// Real mail in: a throwaway Postfix (`Scripts/postfix-instance`) takes SMTP from swaks and Python's smtplib and
/// delivers over LMTP into mailboxd (`--lmtp-listen`); swaks also speaks LMTP to mailboxd directly.
@Suite("Mail from Postfix", .serialized)
struct MailFromPostfixTests {
    /// A cluster whose mailboxd listens for LMTP, and a Postfix instance delivering to it.
    final class Setup: Sendable {
        let cluster: Cluster
        let lmtpPort: UInt16
        let smtpPort: UInt16
        let postfix: TemporaryDirectory
        static let maxMessageBytes = 262_144

        init() throws {
            cluster = try Cluster(
                accounts: ["alice", "bob", "jürgen"],
                mailboxdArguments: [
                    "--lmtp-listen", "127.0.0.1:0", "--lmtp-hostname", "mailbox.example.test",
                    "--max-message-bytes", String(Self.maxMessageBytes),
                ])
            let lmtpPort = try #require(cluster.lmtpPort, "no LMTP listener: \(cluster.mailboxd.errorOutput)")
            self.lmtpPort = lmtpPort
            // Postfix binds its SMTP port itself from its configuration, so this one port is picked beforehand.
            smtpPort = freeLocalPort()
            postfix = try TemporaryDirectory(prefix: "pf")
            let started = try Subprocess.run(
                TestEnvironment.packageRoot.appendingPathComponent("Scripts/postfix-instance").path,
                ["start", postfix.path("i"), "--smtp-port", String(smtpPort), "--lmtp", "127.0.0.1:\(lmtpPort)"])
            try #require(started.status == 0, "postfix did not start: \(started.stderr)")
        }

        deinit {
            _ = try? Subprocess.run(
                TestEnvironment.packageRoot.appendingPathComponent("Scripts/postfix-instance").path,
                ["stop", postfix.path("i")])
        }

        var maillog: String { ChildProcess.read(postfix.path("i/maillog")) }

        /// Waits until Postfix's log has a final status for each recipient; returns each one's status line.
        func outcomes(_ recipients: [String]) async -> [String: String] {
            var found: [String: String] = [:]
            _ = await eventually {
                found = [:]
                for line in maillog.split(separator: "\n") where line.contains(" status=") {
                    for recipient in recipients where line.contains("to=<\(recipient)>") && !line.contains("deferred") {
                        found[recipient] = String(line)
                    }
                }
                return found.count == recipients.count
            }
            return found
        }

        func swaks(_ arguments: [String]) throws -> ProcessResult {
            try Subprocess.run(
                try #require(Subprocess.which("swaks"), "swaks is missing (Scripts/bootstrap)"), arguments)
        }
    }

    func messages(_ cluster: Cluster, _ user: String) async throws -> [[String: Any]] {
        let token = try await cluster.login(user)
        return try await cluster.call(.get, cluster.api + "/v1/messages", token: token).body["messages"]
            as? [[String: Any]] ?? []
    }

    @Test func aMultiRecipientMessageBouncesOnlyForTheUnknownRecipient() async throws {
        let setup = try await offPool { try Setup() }
        let sent = try await offPool {
            try setup.swaks([
                "--server", "127.0.0.1:\(setup.smtpPort)", "--from", "sender@sender.test", "--to",
                "alice@example.test,nobody@example.test,bob@example.test", "--header", "Subject: three recipients",
                "--body", "One of us does not exist.",
            ])
        }
        #expect(sent.status == 0, "swaks: \(sent.stdout)")
        let outcomes = await setup.outcomes(["alice@example.test", "bob@example.test", "nobody@example.test"])
        #expect(outcomes["alice@example.test"]?.contains("status=sent (250 2.0.0") == true, "\(outcomes)")
        #expect(outcomes["bob@example.test"]?.contains("status=sent (250 2.0.0") == true, "\(outcomes)")
        #expect(outcomes["nobody@example.test"]?.contains("status=bounced") == true, "\(outcomes)")
        #expect(outcomes["nobody@example.test"]?.contains("550 5.1.1") == true, "\(outcomes)")
        for user in ["alice", "bob"] {
            let inbox = try await messages(setup.cluster, user)
            #expect(inbox.map { $0["subject"] as? String } == ["three recipients"], "\(user): \(inbox)")
            #expect((inbox.first?["body"] as? String)?.hasPrefix("One of us does not exist.\n") == true)
        }
        // What Postfix delivered is what is kept: its Received header is in the raw message.
        let alice = try await setup.cluster.login("alice")
        let id = try #require(try await messages(setup.cluster, "alice").first?["id"] as? String)
        let raw = try await setup.cluster.call(.get, setup.cluster.api + "/v1/messages/\(id)/raw", token: alice)
        #expect(String(decoding: raw.data, as: UTF8.self).contains("Received: from "))
    }

    @Test func anOversizeMessageBouncesWith552() async throws {
        let setup = try await offPool { try Setup() }
        let body = String(repeating: "0123456789abcdef\n", count: Setup.maxMessageBytes / 16)
        let file = setup.postfix.path("big.txt")
        try body.write(toFile: file, atomically: true, encoding: .utf8)
        let sent = try await offPool {
            try setup.swaks([
                "--server", "127.0.0.1:\(setup.smtpPort)", "--from", "sender@sender.test", "--to",
                "alice@example.test", "--header", "Subject: too big", "--body", file,
            ])
        }
        #expect(sent.status == 0, "swaks: \(sent.stdout)")
        let outcomes = await setup.outcomes(["alice@example.test"])
        let line = outcomes["alice@example.test"] ?? ""
        #expect(line.contains("status=bounced") && line.contains("5.3.4"), "\(outcomes)")
        #expect(try await messages(setup.cluster, "alice").isEmpty)
    }

    @Test func eightBitAndSMTPUTF8MailArrives() async throws {
        let setup = try await offPool { try Setup() }
        struct Mail: Encodable {
            let from: String
            let to: [String]
            let mailOptions: [String]
            let charset: String
            let message: String
        }
        let latin1 = Mail(
            from: "joerg@sender.test", to: ["alice@example.test"], mailOptions: ["BODY=8BITMIME"],
            charset: "iso-8859-1",
            message: "From: Jörg <joerg@sender.test>\r\nTo: alice@example.test\r\n"
                + "Subject: =?UTF-8?Q?8-bit_=C3=BCber_SMTP?=\r\nMIME-Version: 1.0\r\n"
                + "Content-Type: text/plain; charset=ISO-8859-1\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"
                + "Grüße aus Köln\r\n")
        let utf8 = Mail(
            from: "rémi@expéditeur.test", to: ["jürgen@example.test"], mailOptions: ["SMTPUTF8", "BODY=8BITMIME"],
            charset: "utf-8",
            message: "From: Rémi <rémi@expéditeur.test>\r\nTo: jürgen@example.test\r\n"
                + "Subject: Café ☕\r\nMIME-Version: 1.0\r\n"
                + "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"
                + "Un café ?\r\n")
        let input = String(decoding: try JSONEncoder().encode([latin1, utf8]), as: UTF8.self)
        let sent = try await offPool {
            try Subprocess.run(
                TestEnvironment.python, [TestEnvironment.peer("smtp_send.py"), String(setup.smtpPort)], input: input)
        }
        #expect(sent.status == 0, "smtplib: \(sent.stderr)")
        let outcomes = await setup.outcomes(["alice@example.test", "jürgen@example.test"])
        #expect(outcomes.values.allSatisfy { $0.contains("status=sent") } && outcomes.count == 2, "\(outcomes)")
        let alice = try await messages(setup.cluster, "alice")
        #expect(alice.first?["subject"] as? String == "8-bit über SMTP")
        #expect(alice.first?["body"] as? String == "Grüße aus Köln\n")
        let jurgen = try await messages(setup.cluster, "jürgen")
        #expect(jurgen.first?["subject"] as? String == "Café ☕")
        #expect(jurgen.first?["from"] as? String == "Rémi <rémi@expéditeur.test>")
    }

    @Test func swaksOverLMTPGetsPipelinedPerRecipientReplies() async throws {
        let setup = try await offPool { try Setup() }
        let result = try await offPool {
            try setup.swaks([
                "--protocol", "LMTP", "--pipeline", "--server", "127.0.0.1:\(setup.lmtpPort)", "--from",
                "sender@sender.test", "--to", "alice@example.test,nobody@example.test,bob@example.test", "--header",
                "Subject: direct",
            ])
        }
        let replies = result.stdout.split(separator: "\n").filter { $0.hasPrefix("<") }.map(String.init)
        #expect(replies.contains { $0.contains("PIPELINING") })
        #expect(replies.contains { $0.contains("550 5.1.1") })
        let alice = replies.firstIndex { $0.contains("250 2.0.0 <alice@example.test> delivered") }
        let bob = replies.firstIndex { $0.contains("250 2.0.0 <bob@example.test> delivered") }
        #expect(alice != nil && bob != nil && alice! < bob!, "\(replies)")
        #expect(try await messages(setup.cluster, "bob").count == 1)
    }

    /// Canaries in every MIME place a leak could hide — an RFC 2047 base64 subject, a quoted-printable body, an
    /// RFC 2231 attachment filename, a display name — never reach the gateway, decoded or encoded, nor
    /// mailboxd's log.
    @Test func mimeCanariesNeverReachTheGatewayOrTheLog() async throws {
        let setup = try await offPool { try Setup() }
        let cluster = setup.cluster
        let session = try await cluster.login("alice")
        let token = try await cluster.registerDevice(session: session)
        let stream = try await cluster.notifications(token)
        let subject = "subj-\(SecureRandom.hex(8))-Grüße"
        let body = "body-\(SecureRandom.hex(8))-schön"
        let filename = "file-\(SecureRandom.hex(8))-ä.pdf"
        let name = "name-\(SecureRandom.hex(8))"
        let encodedSubject = "=?UTF-8?B?\(Data(subject.utf8).base64EncodedString())?="
        let quotedBody = body.replacingOccurrences(of: "ö", with: "=C3=B6")
        let encodedFilename = "UTF-8''" + filename.replacingOccurrences(of: "ä", with: "%C3%A4")
        let message = """
            From: "\(name)" <sender@sender.test>\r
            To: alice@example.test\r
            Subject: \(encodedSubject)\r
            MIME-Version: 1.0\r
            Content-Type: multipart/mixed; boundary="c"\r
            \r
            --c\r
            Content-Type: text/plain; charset=utf-8\r
            Content-Transfer-Encoding: quoted-printable\r
            \r
            \(quotedBody)\r
            --c\r
            Content-Type: application/pdf\r
            Content-Disposition: attachment; filename*=\(encodedFilename)\r
            Content-Transfer-Encoding: base64\r
            \r
            JVBERi0xLjQK\r
            --c--\r

            """
        let file = setup.postfix.path("canary.eml")
        try message.write(toFile: file, atomically: true, encoding: .utf8)
        let sent = try await offPool {
            try setup.swaks([
                "--server", "127.0.0.1:\(setup.smtpPort)", "--from", "sender@sender.test", "--to",
                "alice@example.test", "--data", file,
            ])
        }
        #expect(sent.status == 0, "swaks: \(sent.stdout)")
        let payloads = await stream.waitFor(count: 2)  // registration, then the message
        #expect(payloads.count == 2, "signals: \(payloads)")
        let stored = try #require(try await messages(cluster, "alice").first)
        #expect(stored["subject"] as? String == subject)
        #expect((stored["attachments"] as? [[String: Any]])?.first?["filename"] as? String == filename)
        let log = String(decoding: try await cluster.call(.get, cluster.sim + "/sim/log").data, as: UTF8.self)
        #expect(log.contains(token) || log.count > 50, "the gateway log is empty")
        let mailboxdLog = cluster.mailboxd.errorOutput
        for canary in [subject, body, filename, name, encodedSubject, quotedBody, encodedFilename, "alice@", "sender@"]
        {
            #expect(!log.contains(canary), "\(canary) reached the gateway")
            #expect(!mailboxdLog.contains(canary), "\(canary) reached mailboxd's log")
        }
        for fragment in ["subj-", "body-", "file-", "name-"] { #expect(!log.contains(fragment)) }
    }
}
