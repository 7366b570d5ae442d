import Foundation
import TestSupport
import Testing

/// Real IMAP clients against the real mailboxd's IMAP listener (implicit TLS), and the same client tests against
/// Dovecot, so each asserts the standard rather than our reading of it: Python's imaplib at the wire level (the same
/// account, messages and flags as `/v1`, IDLE hearing a delivery, MOVE with COPYUID, CONDSTORE/QRESYNC, refusals)
/// and mbsync syncing a Maildir both ways.
@Suite(.serialized) struct IMAPClientTests {
    /// mailboxd with its IMAP and LMTP listeners: (cluster, IMAP port, LMTP port).
    static func mailboxd(_ extra: [String] = []) async throws -> (Cluster, UInt16, UInt16) {
        let cluster = try await Cluster.start(
            accounts: ["alice"],
            mailboxdArguments: ["--imap-listen", "127.0.0.1:0", "--lmtp-listen", "127.0.0.1:0"] + extra)
        return (cluster, try #require(cluster.imapPort), try #require(cluster.lmtpPort))
    }

    /// A throwaway Dovecot with the same account, certificate and mailboxes, stopped when the closure returns.
    static func withDovecot<T>(
        certificateFrom cluster: Cluster, _ body: (_ imap: UInt16, _ lmtp: UInt16) throws -> T
    ) throws -> T {
        let directory = try TemporaryDirectory(prefix: "signalfetch-dovecot")
        let peer = TestEnvironment.peer("dovecot_instance.py")
        let started = try Subprocess.run(
            TestEnvironment.python,
            [
                peer, "start", directory.url.path, "--cert", cluster.dataDir + "/tls/server.pem", "--key",
                cluster.dataDir + "/tls/server.key", "--user", "alice", "--password", "password-alice",
            ])
        defer { _ = try? Subprocess.run(TestEnvironment.python, [peer, "stop", directory.url.path]) }
        let ports = try #require(
            try JSONSerialization.jsonObject(with: Data(started.stdout.utf8)) as? [String: Any],
            "Dovecot did not start: \(started.stderr)")
        let imap = try #require((ports["imap"] as? Int).flatMap { UInt16(exactly: $0) })
        let lmtp = try #require((ports["lmtp"] as? Int).flatMap { UInt16(exactly: $0) })
        return try body(imap, lmtp)
    }

    /// A peer's output: its JSON result and what it wrote to standard error.
    struct PeerOutput: Sendable {
        var stdout: String
        var stderr: String

        /// The JSON object the peer printed.
        func json() throws -> [String: Any] {
            try #require(
                try JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: Any],
                "the peer failed: \(stderr)")
        }
    }

    /// Runs a peer to its end.
    static func run(_ peer: String, _ arguments: [String]) throws -> PeerOutput {
        let output = try Subprocess.run(TestEnvironment.python, [TestEnvironment.peer(peer)] + arguments)
        return PeerOutput(stdout: output.stdout, stderr: output.stderr)
    }

    static func imaplib(port: UInt16, lmtp: UInt16, ca: String) throws -> PeerOutput {
        try run("imap_imaplib.py", [String(port), ca, "alice", "password-alice", String(lmtp)])
    }

    @Test func imaplibSyncsReadsAndFilesTheMailboxTheAPIServes() async throws {
        let (cluster, imapPort, lmtpPort) = try await Self.mailboxd()
        let ca = cluster.ca
        let results = try await offPool { try Self.imaplib(port: imapPort, lmtp: lmtpPort, ca: ca) }.json()
        #expect(results["failures"] as? [String] == [], "\(results)")
        let capabilities = results["capabilities"] as? [String] ?? []
        for name in ["IMAP4REV1", "IMAP4REV2", "IDLE", "CONDSTORE", "QRESYNC", "UIDPLUS", "MOVE", "SPECIAL-USE"] {
            #expect(capabilities.contains(name), "capability \(name)")
        }
        #expect(results["wrongPasswordRefused"] as? Bool == true)
        #expect(results["hugeLiteralRefused"] as? Bool == true)
        #expect(results["afterHuge"] as? String == "OK")
        #expect(results["idleHeardExists"] as? Int == 3)
        #expect(results["moveCopyUID"] as? Bool == true)
        #expect(results["vanishedIncludesMoved"] as? Bool == true)
        #expect((results["bogus"] as? String)?.contains(" BAD ") == true)

        // The flags imaplib set are the store's: /v1 shows them on the message, now in the archive.
        let session = try await cluster.login("alice")
        let listing = try await cluster.call(.get, cluster.api + "/v1/messages", token: session)
        let messages = listing.body["messages"] as? [[String: Any]] ?? []
        let archived = messages.first { $0["mailbox"] as? String == "archive" && $0["subject"] as? String == "first" }
        #expect(archived?["flagged"] as? Bool == true)
        #expect(archived?["seen"] as? Bool == true)
        // What imaplib filed with APPEND (with \Seen \Flagged) and COPY is in the store as any message.
        let filed = messages.first { $0["subject"] as? String == "filed by the client" }
        #expect(filed?["mailbox"] as? String == "archive")
        #expect(filed?["seen"] as? Bool == true && filed?["flagged"] as? Bool == true)
        func mailboxes(_ subject: String) -> [String] {
            messages.filter { $0["subject"] as? String == subject }.compactMap { $0["mailbox"] as? String }.sorted()
        }
        #expect(mailboxes("second") == ["archive", "inbox"])
        #expect(mailboxes("appended to the inbox") == ["inbox"])
        // first, second, while idling (LMTP); filed, appended (APPEND); second's copy (COPY); the one APPENDed to
        // the mailbox imaplib made and kept (those in the mailbox it deleted went with it).
        #expect(messages.count == 7)
        // The mailboxes imaplib made, renamed and deleted are the store's: /v1 lists the one it kept, without a role,
        // and its message is there.
        let boxes = try await cluster.call(.get, cluster.api + "/v1/mailboxes", token: session)
        let kept = (boxes.body["mailboxes"] as? [[String: Any]] ?? []).filter { $0["name"] as? String == "Kept" }
        #expect(kept.count == 1 && kept.first?["role"] is NSNull && kept.first?["total"] as? Int == 1, "\(boxes.body)")
        let keptID = try #require(kept.first?["id"] as? String)
        // `/v1` files into it and lists by it; an id the account has no mailbox for is 404, nothing changed.
        let first = try #require(messages.first { $0["subject"] as? String == "first" }?["id"] as? String)
        let moved = try await cluster.call(
            .patch, cluster.api + "/v1/messages/\(first)", token: session, json: ["mailbox": keptID])
        #expect(moved.status == 200 && moved.body["mailbox"] as? String == keptID, "\(moved.body)")
        let nowhere = try await cluster.call(
            .patch, cluster.api + "/v1/messages/\(first)", token: session, json: ["mailbox": "Mnowhere"])
        #expect(nowhere.status == 404 && nowhere.body["error"] as? String == "mailboxNotFound", "\(nowhere.body)")
        let listed = try await cluster.call(.get, cluster.api + "/v1/messages?mailbox=\(keptID)", token: session)
        #expect(listed.status == 200 && (listed.body["messages"] as? [[String: Any]])?.count == 2, "\(listed.body)")
        let unlisted = try await cluster.call(.get, cluster.api + "/v1/messages?mailbox=Mnowhere", token: session)
        #expect(unlisted.status == 404 && unlisted.body["error"] as? String == "mailboxNotFound")
        // The \Answered imaplib stored is JMAP's `$answered` on the same message.
        let jmapSession = try await cluster.call(.get, cluster.api + "/.well-known/jmap", token: session)
        let accountID = try #require(
            (jmapSession.body["primaryAccounts"] as? [String: Any])?["urn:ietf:params:jmap:mail"] as? String)
        let query = try await cluster.call(
            .post, cluster.api + "/jmap/api", token: session,
            json: [
                "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
                "methodCalls": [
                    ["Email/query", ["accountId": accountID, "filter": ["hasKeyword": "$answered"]], "q"]
                ],
            ])
        let answered = ((query.body["methodResponses"] as? [[Any]])?.first?[1] as? [String: Any])?["ids"] as? [String]
        #expect(answered?.count == 1, "\(query.body)")
        #expect(
            answered?.first == messages.first {
                $0["subject"] as? String == "second" && $0["mailbox"] as? String == "inbox"
            }?["id"] as? String)
        #expect(mailboxes("kept in a made mailbox") == [keptID])
        #expect(
            !(boxes.body["mailboxes"] as? [[String: Any]] ?? []).contains {
                ($0["name"] as? String)?.hasPrefix("Done") == true
            })
    }

    @Test func theSameImaplibChecksPassAgainstDovecot() async throws {
        let (cluster, _, _) = try await Self.mailboxd()
        let ca = cluster.ca
        let results = try await offPool {
            try Self.withDovecot(certificateFrom: cluster) { imap, lmtp in
                try Self.imaplib(port: imap, lmtp: lmtp, ca: ca)
            }
        }.json()
        #expect(results["failures"] as? [String] == [], "\(results)")
        #expect(results["idleHeardExists"] as? Int == 3)
        #expect(results["moveCopyUID"] as? Bool == true)
    }

    @Test func imapclientSyncsWithCondstoreAndQresyncAgainstMailboxdAndDovecot() async throws {
        let (cluster, imapPort, lmtpPort) = try await Self.mailboxd()
        let ca = cluster.ca
        let (ours, dovecot) = try await offPool {
            let arguments = { (imap: UInt16, lmtp: UInt16) in
                [String(imap), ca, "alice", "password-alice", String(lmtp)]
            }
            let ours = try Self.run("imap_imapclient.py", arguments(imapPort, lmtpPort))
            let dovecot = try Self.withDovecot(certificateFrom: cluster) { imap, lmtp in
                try Self.run("imap_imapclient.py", arguments(imap, lmtp))
            }
            return (ours, dovecot)
        }
        for (server, output) in [("mailboxd", ours), ("Dovecot", dovecot)] {
            let results = try output.json()
            #expect(results["failures"] as? [String] == [], "\(server): \(results) \(output.stderr)")
            #expect((results["vanished"] as? [Int])?.isEmpty == false, "\(server): VANISHED after an expunge")
        }
    }

    /// Thunderbird ESR, headless under Marionette (Tests/Peers/imap_thunderbird.py): a person's mail client signs in,
    /// downloads the inbox whole, and a message read there becomes `\Seen` on the server, here and on Dovecot.
    @Test func thunderbirdDownloadsTheInboxAndSendsBackAReadMarkOnMailboxdAndDovecot() async throws {
        let (cluster, imapPort, lmtpPort) = try await Self.mailboxd()
        let ca = cluster.ca
        let work = try TemporaryDirectory(prefix: "signalfetch-thunderbird")
        let (ours, dovecot) = try await offPool {
            let arguments = { (imap: UInt16, lmtp: UInt16, profile: String) in
                [
                    "--port", String(imap), "--lmtp", String(lmtp), "--ca", ca, "--user", "alice", "--password",
                    "password-alice", "--profile-dir", work.path(profile),
                ]
            }
            let ours = try Self.run("imap_thunderbird.py", arguments(imapPort, lmtpPort, "ours"))
            let dovecot = try Self.withDovecot(certificateFrom: cluster) { imap, lmtp in
                try Self.run("imap_thunderbird.py", arguments(imap, lmtp, "dovecot"))
            }
            return (ours, dovecot)
        }
        for (server, output) in [("mailboxd", ours), ("Dovecot", dovecot)] {
            let results = try output.json()
            #expect(results["failures"] as? [String] == [], "\(server): \(results) \(output.stderr)")
            #expect(results["subjects"] as? [String] == ["hello thunderbird", "second for thunderbird"], "\(server)")
            #expect(results["offline"] as? Int == 2, "\(server)")
        }
        // The read mark is the store's: /v1 shows it.
        let session = try await cluster.login("alice")
        let listing = try await cluster.call(.get, cluster.api + "/v1/messages", token: session)
        let messages = listing.body["messages"] as? [[String: Any]] ?? []
        #expect(messages.first { $0["subject"] as? String == "hello thunderbird" }?["seen"] as? Bool == true)
        #expect(messages.first { $0["subject"] as? String == "second for thunderbird" }?["seen"] as? Bool == false)
    }

    @Test func mbsyncSyncsAMaildirBothWaysWithMailboxdAndWithDovecot() async throws {
        let (cluster, imapPort, lmtpPort) = try await Self.mailboxd()
        let ca = cluster.ca
        let work = try TemporaryDirectory(prefix: "signalfetch-mbsync")
        let (ours, dovecot) = try await offPool {
            let ours = try Self.run(
                "imap_mbsync.py",
                ["localhost", String(imapPort), ca, "alice", "password-alice", String(lmtpPort), work.path("ours")])
            let dovecot = try Self.withDovecot(certificateFrom: cluster) { imap, lmtp in
                try Self.run(
                    "imap_mbsync.py",
                    ["localhost", String(imap), ca, "alice", "password-alice", String(lmtp), work.path("dovecot")])
            }
            return (ours, dovecot)
        }
        for (server, output) in [("mailboxd", ours), ("Dovecot", dovecot)] {
            let results = try output.json()
            for key in [
                "firstArrived", "flagsReachedServer", "secondArrived", "firstStillFlaggedLocally", "filedReachedServer",
            ] {
                #expect(results[key] as? Bool == true, "\(server): \(key): \(results)")
            }
        }
        // A flag set in the Maildir reached /v1.
        let session = try await cluster.login("alice")
        let listing = try await cluster.call(.get, cluster.api + "/v1/messages", token: session)
        let messages = listing.body["messages"] as? [[String: Any]] ?? []
        #expect(messages.contains { $0["flagged"] as? Bool == true && $0["seen"] as? Bool == true })
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

/// IMAP on instances sharing PostgreSQL: an IDLE client of one instance hears a delivery made through another, by
/// the process's one LISTEN (no look of its own), and MOVE and flags through one show through the other.
@Suite(.serialized) struct IMAPSharedStoreTests {
    @Test func anIdleClientOfOneInstanceHearsADeliveryThroughAnother() async throws {
        let database = try PostgresServer.shared().makeDatabase()
        let cluster = try await Cluster.start(
            accounts: [], mailboxdArguments: ["--database", database, "--imap-listen", "127.0.0.1:0"])
        let (other, _) = try await offPool { try cluster.startAnotherMailboxd(instanceID: "imap-b") }
        defer { other.stop() }
        let otherIMAP = try #require(try other.listeningPorts(prefix: "mailboxd: IMAP on ")["url"])
        try await cluster.addAccount("alice", database: database)
        _ = try await cluster.deliver(to: "alice", subject: "before", body: "x")
        let idle = try await offPool {
            try ChildProcess(
                TestEnvironment.python,
                [TestEnvironment.peer("imap_idle_wait.py"), String(otherIMAP), cluster.ca, "alice", "password-alice"],
                logDirectory: cluster.directory.url.path)
        }
        defer { idle.stop() }
        let idling = try await offPool { idle.waitForOutput(timeout: 30) { $0.contains("idling") } }
        try #require(idling, "the IDLE client did not start: \(idle.errorOutput)")
        // Delivered through the first instance; heard by the second's IDLE client.
        _ = try await cluster.deliver(to: "alice", subject: "while idling", body: "y")
        let status = try await offPool { idle.waitForExit() }
        #expect(status == 0, "\(idle.output) \(idle.errorOutput)")
        #expect(idle.output.contains("\"exists\": 2"), "\(idle.output)")
    }
}
