import Foundation
import HTTPClient
import MailboxStore
import OpenSSLCrypto
import Push
import SQLiteKit
import SignalDispatch
import TestSupport
import Testing

@testable import MailboxService

/// Mail in over LMTP into a real mailboxd (in process, plain HTTP), through real sockets and a real SQLite file:
/// per-recipient replies after DATA, raw messages byte for byte, parts, isolation, retransmissions, limits and a
/// storage failure.
@Suite("LMTP ingest")
struct LMTPIngestTests {
    final class Fixture: Sendable {
        let directory: TemporaryDirectory
        let service: MailboxService
        let client = HTTPClient(configuration: .init(httpVersion: .http1))
        let deliveryToken = SecureRandom.hex(16)
        var api: String { "http://127.0.0.1:\(service.port)" }
        var lmtpPort: UInt16 { service.lmtpPort! }

        init(
            maxMessageBytes: Int = 1 << 20, maxConnections: Int = 16, idleTimeout: Duration = .seconds(30)
        ) async throws {
            directory = try TemporaryDirectory(prefix: "lmtp-ingest")
            var configuration = ServiceConfiguration(
                dataDirectory: directory.path("data"), deliveryToken: deliveryToken)
            configuration.port = 0
            configuration.store.passwordParameters = .testing
            configuration.lmtp = .init(
                host: "127.0.0.1", port: 0,
                session: .init(hostname: "mailbox.test", maxMessageBytes: maxMessageBytes),
                maxConnections: maxConnections, idleTimeout: idleTimeout)
            // Signals go to a recorder: these tests look at what is stored.
            service = try MailboxService(configuration: configuration, router: PushRouter([RecordingPushService()]))
            for name in ["alice", "bob"] {
                try await service.store.createAccount(username: name, password: "password-\(name)")
            }
        }

        func shutdown() async {
            await service.shutdown()
            client.shutdown()
        }

        func login(_ name: String) async throws -> String {
            let response = try await client.execute(
                HTTPClient.Request(
                    method: .post, url: api + "/v1/session", headers: ["Content-Type": "application/json"],
                    body: Data(#"{"username":"\#(name)","password":"password-\#(name)"}"#.utf8)))
            let object = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
            return try #require(object?["accessToken"] as? String)
        }

        func get(_ path: String, token: String) async throws -> HTTPClient.Response {
            try await client.execute(
                HTTPClient.Request(url: api + path, headers: ["Authorization": "Bearer \(token)"]))
        }

        func messages(_ token: String) async throws -> [[String: Any]] {
            let body = try await get("/v1/messages", token: token).body
            return (try JSONSerialization.jsonObject(with: body) as? [String: Any])?["messages"] as? [[String: Any]]
                ?? []
        }

        /// One LMTP transaction, pipelined in one write: the replies to everything up to DATA, then the replies
        /// after the message.
        func transact(
            from: String = "sender@example.org", to recipients: [String], message: [UInt8], quit: Bool = true
        ) async throws -> (envelope: [String], final: [String]) {
            let port = lmtpPort
            return try await offPool {
                let client = try LineClient(port: port)
                _ = client.reply()
                var commands = "LHLO mta.example.org\r\nMAIL FROM:<\(from)>\r\n"
                for recipient in recipients { commands += "RCPT TO:<\(recipient)>\r\n" }
                client.send(commands + "DATA\r\n")
                var envelope = client.reply()  // LHLO
                for _ in 0..<(recipients.count + 2) { envelope += client.reply() }
                let accepted = envelope.filter { $0.hasPrefix("250 2.1.5") }.count
                guard envelope.last?.hasPrefix("354") == true else { return (envelope, []) }
                client.send(Self.dotStuffed(message) + Array(".\r\n".utf8) + (quit ? Array("QUIT\r\n".utf8) : []))
                return (envelope, client.lines(accepted))
            }
        }

        /// The message as it goes over the wire after DATA: lines starting with a dot get another.
        static func dotStuffed(_ message: [UInt8]) -> [UInt8] {
            var out: [UInt8] = []
            var lineStart = true
            for byte in message {
                if lineStart, byte == UInt8(ascii: ".") { out.append(byte) }
                out.append(byte)
                lineStart = byte == 0x0A
            }
            if !lineStart { out += [0x0D, 0x0A] }
            return out
        }
    }

    static func corpus(_ name: String) throws -> [UInt8] {
        let corpus = TestEnvironment.packageRoot.appendingPathComponent("Tests/Mail/MailMIMETests/Corpus")
        return Array(try Data(contentsOf: corpus.appendingPathComponent(name)))
    }

    @Test func pipelinedRecipientsGetOneReplyEachInOrder() async throws {
        let f = try await Fixture()
        let message = Array("From: s@example.org\r\nSubject: hello\r\n\r\n.dotted line\r\nbody\r\n".utf8)
        let (envelope, final) = try await f.transact(
            to: ["alice@example.test", "nobody@example.test", "BOB@example.test"], message: message)
        #expect(envelope.filter { $0.hasPrefix("550 5.1.1") }.count == 1)
        #expect(envelope.filter { $0.hasPrefix("250 2.1.5") }.count == 2)
        #expect(final == ["250 2.0.0 <alice@example.test> delivered", "250 2.0.0 <BOB@example.test> delivered"])
        let alice = try await f.messages(try await f.login("alice"))
        let bob = try await f.messages(try await f.login("bob"))
        #expect(alice.count == 1 && bob.count == 1)
        #expect(alice.first?["body"] as? String == ".dotted line\nbody\n")
        await f.shutdown()
    }

    @Test func sessionsAtOnceAreEachAnsweredAndEachStored() async throws {
        // One event loop serves every connection: each session's replies are its own, whatever the others do.
        let f = try await Fixture(maxConnections: 32)
        let finals = try await withThrowingTaskGroup(of: [String].self) { group in
            for index in 0..<24 {
                group.addTask {
                    let message = Array("From: s@example.org\r\nSubject: number \(index)\r\n\r\nbody \(index)\r\n".utf8)
                    return try await f.transact(to: ["alice@example.test", "bob@example.test"], message: message).final
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(finals.count == 24)
        for final in finals {
            #expect(final == ["250 2.0.0 <alice@example.test> delivered", "250 2.0.0 <bob@example.test> delivered"])
        }
        for name in ["alice", "bob"] {
            let subjects = Set(try await f.messages(try await f.login(name)).compactMap { $0["subject"] as? String })
            #expect(subjects == Set((0..<24).map { "number \($0)" }), "\(name)")
        }
        await f.shutdown()
    }

    @Test func aMessageTooLargeToParseInPlaceIsStoredWhole() async throws {
        // Past LMTPDelivery.parseInPlaceBytes the parse runs on a thread of its own; the message is the same.
        let f = try await Fixture(maxMessageBytes: 8 << 20)
        let line = Array(repeating: UInt8(ascii: "y"), count: 76) + [0x0D, 0x0A]
        let lines = (LMTPDelivery.parseInPlaceBytes / line.count) + 100
        let raw =
            Array("From: s@example.org\r\nSubject: large\r\n\r\n".utf8)
            + Array([[UInt8]](repeating: line, count: lines).joined())
        #expect(raw.count > LMTPDelivery.parseInPlaceBytes)
        let (_, final) = try await f.transact(to: ["alice@example.test"], message: raw)
        #expect(final == ["250 2.0.0 <alice@example.test> delivered"])
        let alice = try await f.login("alice")
        let message = try #require(try await f.messages(alice).first)
        #expect(message["subject"] as? String == "large")
        let stored = try await f.get("/v1/messages/\(try #require(message["id"] as? String))/raw", token: alice)
        #expect(Array(stored.body) == raw)
        await f.shutdown()
    }

    @Test func aClientThatLeavesAfterItsMessageHasItStoredAndTheNextIsServed() async throws {
        let f = try await Fixture()
        let port = f.lmtpPort
        try await offPool {
            let client = try LineClient(port: port)
            _ = client.reply()
            client.send("LHLO mta\r\nMAIL FROM:<s@example.org>\r\nRCPT TO:<alice@example.test>\r\nDATA\r\n")
            for _ in 0..<4 { _ = client.reply() }
            // The message, then gone before any reply.
            client.send("Subject: left\r\n\r\nbody\r\n.\r\n")
        }
        let (_, final) = try await f.transact(
            to: ["alice@example.test"], message: Array("Subject: next\r\n\r\nb\r\n".utf8))
        #expect(final == ["250 2.0.0 <alice@example.test> delivered"])
        let alice = try await f.login("alice")
        let subjects = Set(try await f.messages(alice).compactMap { $0["subject"] as? String })
        #expect(subjects == ["left", "next"])
        await f.shutdown()
    }

    @Test func rawMessageRoundTripsAndPartsAreServedToTheirAccountOnly() async throws {
        let f = try await Fixture()
        let raw = try Self.corpus("mixed-nested.eml")
        let (_, final) = try await f.transact(to: ["alice@example.test"], message: raw)
        #expect(final.first?.hasPrefix("250 2.0.0") == true)
        let alice = try await f.login("alice")
        let bob = try await f.login("bob")
        let message = try #require(try await f.messages(alice).first)
        let id = try #require(message["id"] as? String)
        #expect(message["subject"] as? String == "Quarterly report")
        #expect(message["hasAttachment"] as? Bool == true)
        #expect(message["messageId"] as? String == "mixed-2@example.org")
        let attachments = try #require(message["attachments"] as? [[String: Any]])
        #expect(attachments.map { $0["partId"] as? String } == ["1.2.2", "2", "3"])
        #expect(attachments[1]["filename"] as? String == "Q4 résumé.pdf")
        #expect(attachments[1]["size"] as? Int == 1033)
        let cc = try #require(message["cc"] as? [[String: String]])
        #expect(cc.map { $0["address"] } == ["carol@example.test", "dave@example.test"])

        let stored = try await f.get("/v1/messages/\(id)/raw", token: alice)
        #expect(stored.status == 200)
        #expect(stored.headers["Content-Type"] == "message/rfc822")
        #expect(stored.headers["Content-Disposition"] == "attachment; filename=\"message.eml\"")
        #expect(stored.headers["X-Content-Type-Options"] == "nosniff")
        #expect(Array(stored.body) == raw)
        let pdf = try await f.get("/v1/messages/\(id)/parts/2", token: alice)
        #expect(pdf.status == 200)
        #expect(pdf.headers["Content-Type"] == "application/pdf")
        #expect(
            pdf.headers["Content-Disposition"]
                == "attachment; filename=\"Q4 r_sum_.pdf\"; filename*=UTF-8''Q4%20r%C3%A9sum%C3%A9.pdf")
        #expect(Array(pdf.body) == Array("%PDF-1.4\n".utf8) + (0..<4).flatMap { _ in (0...255).map(UInt8.init) })
        let single = try JSONSerialization.jsonObject(with: try await f.get("/v1/messages/\(id)", token: alice).body)
        #expect((single as? [String: Any])?["htmlBody"] as? String != nil)

        for path in ["/v1/messages/\(id)", "/v1/messages/\(id)/raw", "/v1/messages/\(id)/parts/2"] {
            let other = try await f.get(path, token: bob)
            #expect(other.status == 404, "\(path) served to another account")
        }
        #expect(try await f.get("/v1/messages/\(id)/parts/9", token: alice).status == 404)
        for bad in ["0", "1..2", "x", "01", String(repeating: "1.", count: 20) + "1"] {
            let response = try await f.get("/v1/messages/\(id)/parts/\(bad)", token: alice)
            #expect(response.status == 400, "part id \(bad)")
            let error = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
            #expect(error?["error"] as? String == "invalidArgument")
        }
        await f.shutdown()
    }

    @Test func aTextPartIsServedWithItsCharset() async throws {
        let f = try await Fixture()
        let raw = try Self.corpus("shift-jis.eml")
        _ = try await f.transact(to: ["alice@example.test"], message: raw)
        let alice = try await f.login("alice")
        let message = try #require(try await f.messages(alice).first)
        #expect(message["body"] as? String == "日本語のテキストです。\nよろしくお願いします。\n")
        let part = try await f.get("/v1/messages/\(message["id"] as? String ?? "")/parts/1", token: alice)
        #expect(part.status == 200)
        #expect(part.headers["Content-Type"] == "text/plain; charset=shift_jis")
        #expect(String(data: part.body, encoding: .shiftJIS) == "日本語のテキストです。\nよろしくお願いします。\n")
        await f.shutdown()
    }

    @Test func aRetransmissionStoresNoSecondCopy() async throws {
        let f = try await Fixture()
        let raw = try Self.corpus("alternative.eml")
        for _ in 0..<3 {
            let (_, final) = try await f.transact(to: ["alice@example.test"], message: raw)
            #expect(final == ["250 2.0.0 <alice@example.test> delivered"])
        }
        let messages = try await f.messages(try await f.login("alice"))
        #expect(messages.count == 1)
        #expect(f.service.metrics.render().contains("mailboxd_lmtp_deliveries_total{result=\"duplicate\"} 2"))
        await f.shutdown()
    }

    @Test func aStorageFailureIs451AndLeavesNothingHalfStored() async throws {
        let f = try await Fixture()
        // A real SQLite failure inside the store's write: a trigger that refuses every new message.
        let database = try Database(path: f.directory.path("data/mailbox.sqlite"))
        try database.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON messages BEGIN SELECT RAISE(ABORT, 'refused'); END")
        let raw = try Self.corpus("alternative.eml")
        let (_, failed) = try await f.transact(to: ["alice@example.test", "bob@example.test"], message: raw)
        #expect(failed.count == 2 && failed.allSatisfy { $0.hasPrefix("451 4.3.0") }, "\(failed)")
        #expect(try database.scalar("SELECT count(*) FROM blobs").int64 == 0)
        #expect(try database.scalar("SELECT count(*) FROM messages").int64 == 0)
        try database.execute("DROP TRIGGER refuse")
        let (_, retried) = try await f.transact(to: ["alice@example.test"], message: raw)
        #expect(retried == ["250 2.0.0 <alice@example.test> delivered"])
        #expect(try await f.messages(try await f.login("alice")).count == 1)
        await f.shutdown()
    }

    @Test func oversizeMessagesAre552() async throws {
        let f = try await Fixture(maxMessageBytes: 4096)
        let big = Array("Subject: big\r\n\r\n".utf8) + Array(repeating: UInt8(ascii: "x"), count: 8000) + [0x0D, 0x0A]
        let (_, final) = try await f.transact(to: ["alice@example.test"], message: big)
        #expect(final.count == 1 && final[0].hasPrefix("552 5.3.4"))
        let port = f.lmtpPort
        let declared = try await offPool { () -> [String] in
            let client = try LineClient(port: port)
            _ = client.reply()
            client.send("LHLO mta\r\nMAIL FROM:<s@example.org> SIZE=99999\r\n")
            _ = client.reply()
            return client.reply()
        }
        #expect(declared.first?.hasPrefix("552 5.3.4") == true)
        #expect(try await f.messages(try await f.login("alice")).isEmpty)
        await f.shutdown()
    }

    @Test func connectionLimitAndIdleTimeoutAnswer421() async throws {
        let f = try await Fixture(maxConnections: 2, idleTimeout: .milliseconds(300))
        let port = f.lmtpPort
        let replies = try await offPool { () -> (String?, String?, String?) in
            let first = try LineClient(port: port)
            let second = try LineClient(port: port)
            _ = first.line()
            _ = second.line()
            let third = try LineClient(port: port)
            let refused = third.line()
            // Silence past the idle timeout ends the session.
            let timedOut = first.line(timeout: 5)
            return (refused, timedOut, third.line(timeout: 1))
        }
        #expect(replies.0?.hasPrefix("421 4.3.2") == true)
        #expect(replies.1?.hasPrefix("421 4.4.2") == true)
        #expect(replies.2 == nil)
        await f.shutdown()
    }

    @Test func httpDeliveriesServeTheRFC5322MessageTheirFieldsMake() async throws {
        let f = try await Fixture()
        let response = try await f.client.execute(
            HTTPClient.Request(
                method: .post, url: f.api + "/v1/deliveries",
                headers: ["Content-Type": "application/json", "Authorization": "Bearer \(f.deliveryToken)"],
                body: Data(
                    #"{"to":"alice","from":"Zoë <zoe@example.org>","subject":"Grüße","body":"Hallo\nWelt"}"#.utf8)))
        #expect(response.status == 201)
        let alice = try await f.login("alice")
        let message = try #require(try await f.messages(alice).first)
        #expect(message["subject"] as? String == "Grüße")
        #expect(message["body"] as? String == "Hallo\nWelt")
        #expect((message["to"] as? [[String: String]])?.first?["address"] == "alice")
        let id = try #require(message["id"] as? String)
        let raw = try await f.get("/v1/messages/\(id)/raw", token: alice)
        #expect(raw.status == 200)
        let text = String(decoding: raw.body, as: UTF8.self)
        #expect(text.contains("Subject: =?UTF-8?"), "the subject is RFC 2047 encoded")
        #expect(text.contains("Message-Id: <\(message["messageId"] as? String ?? "?")>"))
        #expect(raw.body.allSatisfy { $0 < 0x80 })
        // Made from the stored fields when asked for: the same bytes every time, the body as its part, no blob.
        #expect(try await f.get("/v1/messages/\(id)/raw", token: alice).body == raw.body)
        let part = try await f.get("/v1/messages/\(id)/parts/1", token: alice)
        #expect(part.status == 200)
        #expect(
            String(decoding: part.body, as: UTF8.self).replacingOccurrences(of: "\r\n", with: "\n").trimmingCharacters(
                in: .newlines) == "Hallo\nWelt")
        let database = try Database(path: f.directory.path("data/mailbox.sqlite"))
        #expect(try database.scalar("SELECT count(*) FROM blobs").int64 == 0)
        // A line break in a header field would make the message built from it say something else: refused.
        for field in ["to", "from", "subject"] {
            var fields = ["to": "alice", "from": "a@example.org", "subject": "s", "body": "b"]
            fields[field] = (fields[field] ?? "") + "\r\nBcc: victim@example.org"
            let refused = try await f.client.execute(
                HTTPClient.Request(
                    method: .post, url: f.api + "/v1/deliveries",
                    headers: ["Content-Type": "application/json", "Authorization": "Bearer \(f.deliveryToken)"],
                    body: try JSONSerialization.data(withJSONObject: fields)))
            #expect(refused.status == 400, "\(field)")
            let error = try JSONSerialization.jsonObject(with: refused.body) as? [String: Any]
            #expect(error?["error"] as? String == "invalidArgument")
        }
        #expect(try await f.messages(alice).count == 1)
        await f.shutdown()
    }
}
