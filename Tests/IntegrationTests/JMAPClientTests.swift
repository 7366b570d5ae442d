import Foundation
import TestSupport
import Testing

/// A standard JMAP client (jmapc) against the real mailboxd over TLS: it syncs the mailbox, reads an email's text
/// and its attachment, marks it seen, sees the change through Email/changes and through the event stream, and the
/// `/v1` API sees the same flag.
@Suite(.serialized) struct JMAPClientTests {
    @Test func jmapcSyncsReadsAnAttachmentMarksSeenAndSeesTheChange() async throws {
        let cluster = try await Cluster.start(
            accounts: ["alice"],
            mailboxdArguments: ["--lmtp-listen", "127.0.0.1:0", "--lmtp-hostname", "mailbox.example.test"])
        let lmtpPort = try #require(cluster.lmtpPort, "no LMTP listener: \(cluster.mailboxd.errorOutput)")
        let file = cluster.directory.path("message.eml")
        try SampleMail.multipartWithAttachment.write(toFile: file, atomically: true, encoding: .utf8)
        let swaks = try await offPool {
            try Subprocess.run(
                try #require(Subprocess.which("swaks"), "swaks is missing (Scripts/bootstrap)"),
                [
                    "--protocol", "LMTP", "--server", "127.0.0.1:\(lmtpPort)", "--from", "remi@example.test", "--to",
                    "alice@example.test", "--data", "@" + file,
                ])
        }
        try #require(swaks.stdout.contains("250 2.0.0"), "LMTP delivery failed: \(swaks.stdout)")
        _ = try await cluster.deliver(to: "alice", subject: "fields only", body: "delivered as fields")
        let downloads = cluster.directory.path("downloads")
        try FileManager.default.createDirectory(atPath: downloads, withIntermediateDirectories: true)
        let result = try await offPool {
            try Subprocess.run(
                TestEnvironment.python,
                [
                    TestEnvironment.peer("jmap_jmapc.py"), "127.0.0.1:\(cluster.apiPort)", "alice", "password-alice",
                    downloads,
                ],
                environment: ["REQUESTS_CA_BUNDLE": cluster.ca])
        }
        try #require(result.status == 0, "jmapc failed: \(result.stderr)")
        let parsed = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
        let out = try #require(parsed as? [String: Any], "\(result.stdout)")
        #expect(out["username"] as? String == "alice")
        #expect(out["total"] as? Int == 2)
        #expect(out["threads"] as? Int == 2)
        let emails = try #require(out["emails"] as? [[String: Any]])
        let mime = try #require(emails.first { $0["subject"] as? String == "Grüße aus Köln with a file" }, "\(emails)")
        #expect(mime["text"] as? String == "Plain text body")
        #expect(mime["from"] as? [String] == ["remi@example.test"])
        let attachment = try #require((mime["attachments"] as? [[String: Any]])?.first)
        #expect(attachment["name"] as? String == "report.pdf")
        #expect(attachment["type"] as? String == "application/pdf")
        let pdf = try #require(Data(base64Encoded: "JVBERi0xLjQKJcfsj6IKdGVzdAo="))
        #expect(attachment["bytes"] as? Int == pdf.count)
        #expect(
            emails.contains {
                $0["text"] as? String == "delivered as fields\n" || $0["text"] as? String == "delivered as fields"
            })
        // The first email of the query (the newest) was marked seen: the change is seen by jmapc and by /v1.
        let target = try #require(emails.first?["id"] as? String)
        let setUpdated = out["setUpdated"] as? [String]
        #expect(setUpdated == [target])
        let changes = try #require(out["changes"] as? [String: Any])
        let updated = changes["updated"] as? [String]
        #expect(updated == [target])
        #expect((out["keywordsAfter"] as? [String: Bool])?["$seen"] == true)
        let events = try #require(out["events"] as? [[String: Any]])
        let eventState = events.first?["email"] as? String
        let newState = changes["newState"] as? String
        #expect(eventState != nil && eventState == newState, "\(events)")
        let session = try await cluster.login("alice")
        let message = try await cluster.call(.get, cluster.api + "/v1/messages/\(target)", token: session)
        #expect(message.body["seen"] as? Bool == true)
    }
}
