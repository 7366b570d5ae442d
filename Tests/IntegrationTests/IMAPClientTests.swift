import Foundation
import TestSupport
import Testing

/// Python's imaplib against the real mailboxd's IMAP listener (implicit TLS): the same account, messages and flags
/// as `/v1`, IDLE hearing a delivery made through the API, MOVE with COPYUID, CONDSTORE/QRESYNC, refusals.
@Suite(.serialized) struct IMAPClientTests {
    @Test func imaplibSyncsReadsAndFilesTheMailboxTheAPIServes() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"], mailboxdArguments: ["--imap-listen", "127.0.0.1:0"])
        let imapPort = try #require(cluster.imapPort)
        _ = try await cluster.deliver(to: "alice", subject: "first", body: "one")
        _ = try await cluster.deliver(to: "alice", subject: "second", body: "two")
        let (ca, api, data) = (cluster.ca, cluster.api, cluster.dataDir)
        let output = try await offPool {
            try Subprocess.run(
                TestEnvironment.python,
                [
                    TestEnvironment.peer("imap_imaplib.py"), String(imapPort), ca, "alice", "password-alice", api,
                    data + "/delivery-token",
                ])
        }
        let results = try #require(
            try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any],
            "imaplib failed: \(output.stderr)")
        let capabilities = results["capabilities"] as? [String] ?? []
        for name in ["IMAP4REV1", "IMAP4REV2", "IDLE", "CONDSTORE", "QRESYNC", "UIDPLUS", "MOVE", "SPECIAL-USE"] {
            #expect(capabilities.contains(name), "capability \(name)")
        }
        #expect((results["wrongPassword"] as? String)?.contains("AUTHENTICATIONFAILED") == true)
        #expect(results["login"] as? String == "OK")
        let list = results["list"] as? [String] ?? []
        #expect(list.contains { $0.contains("\\Archive") && $0.contains("Archive") })
        #expect(list.contains { $0.contains("\\Trash") })
        #expect(results["exists"] as? Int == 2)
        let uids = results["uids"] as? [Int] ?? []
        #expect(uids.count == 2 && uids == uids.sorted())
        let fetched = "\(results["fetch"] ?? "")"
        #expect(fetched.contains("Subject: first"), "BODY.PEEK[] is the message the API stored")
        #expect(fetched.contains("ENVELOPE ("), "an ENVELOPE")
        #expect((results["flagged"] as? String) == String(uids.first ?? 0))
        #expect((results["bogus"] as? String)?.contains(" BAD ") == true)
        #expect((results["hugeLiteral"] as? String)?.contains("NO [TOOBIG]") == true)
        #expect(results["afterHuge"] as? String == "OK")
        #expect(results["idleStart"] as? String == "+ idling")
        #expect(results["idleHeard"] as? String == "* 3 EXISTS")
        #expect((results["idleDone"] as? String)?.contains("OK") == true)
        #expect((results["move"] as? [String])?.first?.contains("COPYUID") == true)
        #expect((results["status"] as? String)?.contains("MESSAGES 1") == true)
        #expect(results["qresyncSelect"] as? String == "OK")
        #expect((results["vanished"] as? [String])?.first?.hasPrefix("(EARLIER)") == true, "the moved UID vanished")
        #expect(!(results["changedSince"] as? [String] ?? []).isEmpty)

        // The flags imaplib set are the store's: /v1 shows them on the message, now in the archive.
        let session = try await cluster.login("alice")
        let listing = try await cluster.call(.get, cluster.api + "/v1/messages", token: session)
        let messages = listing.body["messages"] as? [[String: Any]] ?? []
        let archived = messages.first { $0["mailbox"] as? String == "archive" }
        #expect(archived?["flagged"] as? Bool == true)
        #expect(archived?["seen"] as? Bool == true)
        #expect(archived?["subject"] as? String == "first")
        #expect(messages.count == 3)
    }

    @Test func aPlainListenerRefusesLoginsAndTheLineAndLiteralLimitsHold() async throws {
        let cluster = try await Cluster.start(
            accounts: ["alice"], mailboxdArguments: ["--imap-listen", "127.0.0.1:0", "--imap-plain"])
        let port = try #require(cluster.imapPort)
        try await offPool {
            let client = try LineClient(port: port)
            let greeting = try #require(client.line())
            #expect(greeting.hasPrefix("* OK") && greeting.contains("LOGINDISABLED"))
            client.send("a1 LOGIN alice password-alice\r\n")
            #expect(client.line()?.hasPrefix("a1 NO [PRIVACYREQUIRED]") == true)
            client.send("a2 FETCH 1 FLAGS\r\n")
            #expect(client.line()?.hasPrefix("a2 BAD") == true)
            client.send("a3 \(String(repeating: "x", count: 70_000))\r\n")
            #expect(client.line()?.hasPrefix("a3 BAD Command line too long") == true)
            client.send("a4 NOOP\r\n")
            #expect(client.line() == "a4 OK NOOP completed")
            // A non-synchronizing literal past the limit cannot be skipped: BYE, and the connection closes.
            client.send("a5 LOGIN {99999999999+}\r\n")
            #expect(client.line()?.hasPrefix("* BYE") == true)
            #expect(client.line() == nil)
        }
    }
}
