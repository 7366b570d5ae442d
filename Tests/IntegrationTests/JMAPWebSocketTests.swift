import Foundation
import TestSupport
import Testing

/// JMAP over WebSocket (RFC 8887) against the real binary, with two real clients (Tests/Peers/jmap_websocket.py):
/// `websockets` at the frame level and jmaplib's WebSocketClient. The socket the Session names answers requests by
/// `requestId`, pushes a delivery as a StateChange, opens with a single-use ticket, and refuses bad input with the
/// RequestError, close code or HTTP status RFC 8887 and RFC 6455 name.
@Suite(.serialized) struct JMAPWebSocketTests {
    /// alice's socket on the listener at `port`, held by Tests/Peers/jmap_websocket_wait.py with push on for Email,
    /// once it says it is listening: it prints the first StateChange, or the server's close code, and exits.
    /// With `bearer`, the socket is opened with that access token instead of the password.
    static func listening(_ cluster: Cluster, port: UInt16, bearer: String? = nil) async throws -> ChildProcess {
        let credentials = bearer.map { ["--bearer", $0] } ?? ["alice", "password-alice"]
        let listener = try await offPool {
            try ChildProcess(
                TestEnvironment.python,
                [TestEnvironment.peer("jmap_websocket_wait.py"), "wss://127.0.0.1:\(port)/jmap/ws", cluster.ca]
                    + credentials,
                logDirectory: cluster.directory.url.path)
        }
        let listening = try await offPool { listener.waitForOutput(timeout: 30) { $0.contains("listening") } }
        guard listening else {
            listener.stop()
            throw HarnessError("the WebSocket client did not start: \(listener.output) \(listener.errorOutput)")
        }
        return listener
    }

    @Test func twoClientsRequestHearPushesAndAreRefusedWhatTheRFCRefuses() async throws {
        let cluster = try await Cluster.start(
            accounts: ["alice"], mailboxdArguments: ["--jmap-ws-listen", "127.0.0.1:0"])
        let webSocketPort = try #require(cluster.jmapWebSocketPort)
        // mailboxd gives JMAP requests half its 1 MiB body limit.
        let maxMessageBytes = 512 * 1024
        let plan: [String: Any] = [
            "api": cluster.api, "ca": cluster.ca, "username": "alice", "password": "password-alice",
            "deliveryUrl": cluster.api + "/v1/deliveries", "deliveryToken": cluster.deliveryToken,
            "maxMessageBytes": maxMessageBytes,
        ]
        let planFile = cluster.directory.path("jmap-websocket-plan.json")
        try JSONSerialization.data(withJSONObject: plan).write(to: URL(fileURLWithPath: planFile))
        let result = try await offPool {
            try Subprocess.run(TestEnvironment.python, [TestEnvironment.peer("jmap_websocket.py"), planFile])
        }
        let parsed = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
        let seen = try #require(parsed as? [String: Any], "no findings from the clients: \(result.stderr)")
        #expect(result.status == 0, "clients: \(seen["error"] ?? result.stderr)")

        // The Session names the listener; the socket speaks `jmap` and answers a request by its id, with the API's
        // session state.
        let capability = try #require(seen["capability"] as? [String: Any])
        #expect(capability["url"] as? String == "wss://127.0.0.1:\(webSocketPort)/jmap/ws")
        #expect(capability["supportsPush"] as? Bool == true)
        #expect(seen["subprotocol"] as? String == "jmap")
        let response = try #require(seen["response"] as? [String: Any])
        #expect(response["type"] as? String == "Response")
        #expect(response["requestId"] as? String == "first")
        #expect(response["method"] as? String == "Mailbox/get")
        #expect(response["sameSessionState"] as? Bool == true)

        // Bad messages get RequestErrors and the socket stays open for the next.
        let notJSON = try #require(seen["notJSON"] as? [String: Any])
        #expect(notJSON["@type"] as? String == "RequestError")
        #expect(notJSON["type"] as? String == "urn:ietf:params:jmap:error:notJSON")
        let unknownType = try #require(seen["unknownType"] as? [String: Any])
        #expect(unknownType["type"] as? String == "urn:ietf:params:jmap:error:notRequest")
        #expect(unknownType["requestId"] as? String == "odd")
        #expect(seen["afterEnable"] as? String == "echo")

        // A delivery reaches the socket as a StateChange for the types asked for, with its pushState.
        #expect(seen["delivered"] as? Int == 201)
        let change = try #require(seen["stateChange"] as? [String: Any])
        #expect(change["@type"] as? String == "StateChange")
        let changed = try #require(change["changed"] as? [String: [String: String]])
        #expect(changed.values.first.map { Array($0.keys) } == ["Email"])
        #expect((change["pushState"] as? String)?.isEmpty == false)

        // RFC 6455's close codes: a binary frame (1003), a message over the limit (1009).
        #expect(seen["binaryClose"] as? Int == 1003)
        #expect(seen["oversizeClose"] as? Int == 1009)

        // A ticket opens one socket, once; no credentials and another subprotocol open nothing.
        #expect(seen["ticketExpiresIn"] as? Int == 60)
        #expect(seen["ticketAnswer"] as? String == "t")
        for (what, status, code) in [
            ("reusedTicket", 401, "unauthorized"), ("noCredentials", 401, "unauthorized"),
            ("otherSubprotocol", 400, "unsupportedSubprotocol"),
        ] {
            let refusal = try #require(seen[what] as? [String: Any], "\(what)")
            #expect(refusal["status"] as? Int == status, "\(what): \(refusal)")
            #expect((refusal["body"] as? [String: Any])?["error"] as? String == code, "\(what): \(refusal)")
        }
        #expect(seen["basicTicket"] as? Int == 401, "tickets are for bearer tokens only")

        // jmaplib runs a batch over the socket and hears the next delivery.
        #expect(seen["jmaplibEmailState"] as? Bool == true)
        #expect(seen["jmaplibChange"] as? [String] == ["Email"])
        #expect(seen["jmaplibPushState"] as? Bool == true)

        // Nothing the clients sent or received is in mailboxd's log: no ticket, token or subject.
        let log = cluster.mailboxd.errorOutput
        #expect(!log.contains("over the socket") && !log.contains("ticket="), "mailboxd logged content")
    }

    /// Two instances share a PostgreSQL store: a delivery committed through the first reaches a socket held on the
    /// second as a StateChange, through the one LISTEN the second holds.
    @Test func aSocketOnOneInstanceHearsADeliveryThroughAnother() async throws {
        let database = try PostgresServer.shared().makeDatabase()
        let cluster = try await Cluster.start(
            accounts: [], mailboxdArguments: ["--database", database, "--jmap-ws-listen", "127.0.0.1:0"])
        let (other, _) = try await offPool { try cluster.startAnotherMailboxd(instanceID: "jmap-ws-b") }
        defer { other.stop() }
        let otherPort = try #require(try other.listeningPorts(prefix: "mailboxd: JMAP WebSocket on ")["url"])
        try await cluster.addAccount("alice", database: database)
        let listener = try await Self.listening(cluster, port: otherPort)
        defer { listener.stop() }
        _ = try await cluster.deliver(to: "alice", subject: "through the first instance", body: "z")
        let status = try await offPool { listener.waitForExit() }
        #expect(status == 0, "\(listener.output) \(listener.errorOutput)")
        #expect(
            listener.output.contains("\"@type\": \"StateChange\"") && listener.output.contains("\"Email\""),
            "\(listener.output)")
    }

    /// A browser opens the socket as a web client must, with a single-use ticket in the URL (it cannot send an
    /// `Authorization` header on a WebSocket): headless Chromium, trusting the dev CA, speaks `jmap`, is answered,
    /// hears a delivery, and the same ticket opens nothing a second time.
    @Test func chromiumOpensTheSocketWithATicketAndTheTicketOnlyOnce() async throws {
        let cluster = try await Cluster.start(
            accounts: ["alice"], mailboxdArguments: ["--jmap-ws-listen", "127.0.0.1:0"])
        let home = cluster.directory.path("chromium-home")
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        let result = try await offPool {
            try Subprocess.run(
                TestEnvironment.python,
                [
                    TestEnvironment.peer("jmap_websocket_chromium.py"), "--api", cluster.api, "--ca", cluster.ca,
                    "--home", home, "--username", "alice", "--password", "password-alice", "--delivery-token-file",
                    cluster.dataDir + "/delivery-token", "--timeout", "45",
                ])
        }
        let parsed = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
        let seen = try #require(parsed as? [String: Any], "no findings from Chromium: \(result.stderr.suffix(4000))")
        #expect(result.status == 0, "Chromium: \(seen["error"] ?? result.stderr.suffix(4000))")
        #expect(seen["ticketUrlHasNoToken"] as? Bool == true)
        #expect(seen["opened"] as? Bool == true)
        #expect(seen["protocol"] as? String == "jmap")
        let response = try #require(seen["response"] as? [String: Any], "\(seen)")
        #expect(response["requestId"] as? String == "from-the-page")
        let change = try #require(seen["stateChange"] as? [String: Any], "\(seen)")
        #expect(change["@type"] as? String == "StateChange")
        let reused = try #require(seen["reused"] as? [String: Any])
        #expect(reused["opened"] as? Bool == false, "a used ticket opened a second socket")
    }

    /// mailboxd stopping closes each socket with 1001 (going away) before it exits, so a client knows to reconnect
    /// elsewhere rather than that the network broke.
    @Test func shutdownClosesEverySocketWithGoingAway() async throws {
        let cluster = try await Cluster.start(
            accounts: ["alice"], mailboxdArguments: ["--jmap-ws-listen", "127.0.0.1:0"])
        let port = try #require(cluster.jmapWebSocketPort)
        let listener = try await Self.listening(cluster, port: port)
        defer { listener.stop() }
        let status = try await offPool { cluster.mailboxd.stop(signal: SIGTERM, timeout: 30) }
        #expect(status == 0, "mailboxd: \(cluster.mailboxd.errorOutput)")
        #expect(try await offPool { listener.waitForExit() } == 0, "\(listener.output) \(listener.errorOutput)")
        #expect(listener.output.contains("\"closed\": 1001"), "\(listener.output)")
    }

    /// Signing out ends what the token holds open: its socket closes with 1008 (policy violation) at once, while a
    /// socket opened with the password stays and hears the next delivery.
    @Test func signingOutClosesTheTokensSocketWith1008() async throws {
        let cluster = try await Cluster.start(
            accounts: ["alice"], mailboxdArguments: ["--jmap-ws-listen", "127.0.0.1:0"])
        let port = try #require(cluster.jmapWebSocketPort)
        let token = try await cluster.login("alice")
        let withToken = try await Self.listening(cluster, port: port, bearer: token)
        defer { withToken.stop() }
        let withPassword = try await Self.listening(cluster, port: port)
        defer { withPassword.stop() }
        let signedOut = try await cluster.call(.delete, cluster.api + "/v1/session", token: token)
        #expect(signedOut.status == 204)
        #expect(try await offPool { withToken.waitForExit() } == 0, "\(withToken.output) \(withToken.errorOutput)")
        #expect(withToken.output.contains("\"closed\": 1008"), "\(withToken.output)")
        _ = try await cluster.deliver(to: "alice", subject: "after the sign-out", body: "text")
        #expect(try await offPool { withPassword.waitForExit() } == 0, "\(withPassword.output)")
        #expect(withPassword.output.contains("StateChange"), "\(withPassword.output)")
    }

    /// What the listener refuses before anything opens, sent by curl: another path (404), another method (405), and
    /// one socket more than the account may hold (429), each with the API's `{"error","message"}` body.
    @Test func theListenerRefusesOtherPathsMethodsAndOneSocketTooMany() async throws {
        let cluster = try await Cluster.start(
            accounts: ["alice"],
            mailboxdArguments: ["--jmap-ws-listen", "127.0.0.1:0", "--jmap-ws-max-sockets-per-account", "1"])
        let port = try #require(cluster.jmapWebSocketPort)
        let curl = try requireTool("curl")
        func upgrade(_ method: String, _ path: String) async throws -> String {
            let result = try await offPool {
                try Subprocess.run(
                    curl,
                    [
                        "-s", "--http1.1", "--max-time", "20", "--cacert", cluster.ca, "-u", "alice:password-alice",
                        "-X", method, "-H", "Connection: Upgrade", "-H", "Upgrade: websocket", "-H",
                        "Sec-WebSocket-Version: 13", "-H", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "-H",
                        "Sec-WebSocket-Protocol: jmap", "-w", "\n%{http_code}", "https://127.0.0.1:\(port)\(path)",
                    ])
            }
            return result.stdout
        }
        let elsewhere = try await upgrade("GET", "/jmap/eventsource")
        #expect(elsewhere.hasSuffix("\n404") && elsewhere.contains("\"error\":\"notFound\""), "\(elsewhere)")
        let posted = try await upgrade("POST", "/jmap/ws")
        #expect(posted.hasSuffix("\n405") && posted.contains("\"error\":\"methodNotAllowed\""), "\(posted)")
        let held = try await Self.listening(cluster, port: port)
        defer { held.stop() }
        let second = try await upgrade("GET", "/jmap/ws")
        #expect(second.hasSuffix("\n429") && second.contains("\"error\":\"tooManySockets\""), "\(second)")
    }
}
