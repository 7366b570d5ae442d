import Foundation
import HTTPClient
import TestSupport
import Testing

/// OpenTelemetry traces over OTLP/HTTP, decoded by a receiver on the OpenTelemetry project's own protobuf classes
/// (`Tests/Peers/otlp_receiver.py`, opentelemetry-proto): one trace per change from its arrival to each device's
/// fetch, written by whichever instances sharing the store did the work, with no content in any span.
@Suite(.serialized) struct TracingTests {
    /// The receiver, started on a port of its own.
    final class Receiver: Sendable {
        let process: ChildProcess
        let port: UInt16

        init(directory: String) throws {
            process = try ChildProcess(
                TestEnvironment.python, ["-u", TestEnvironment.peer("otlp_receiver.py")], logDirectory: directory)
            var port: UInt16?
            _ = process.waitForOutput(timeout: 20) { text in
                port = text.split(separator: "\n").first.flatMap { UInt16($0) }
                return port != nil
            }
            self.port = try #require(port, "otlp_receiver.py did not start: \(process.errorOutput)")
        }

        var url: String { "http://127.0.0.1:\(port)" }

        /// Every span received so far.
        func spans(_ client: HTTPClient) async throws -> [[String: Any]] {
            let response = try await client.execute(HTTPClient.Request(url: url + "/spans"))
            return (try JSONSerialization.jsonObject(with: response.body) as? [[String: Any]]) ?? []
        }

        deinit { process.stop() }
    }

    /// Python's imaplib as a mail app resynchronizing: LOGIN, ENABLE QRESYNC, SELECT INBOX to learn UIDVALIDITY,
    /// then SELECT INBOX (QRESYNC (UIDVALIDITY MODSEQ)) from the HIGHESTMODSEQ given. Arguments: port, CA, modseq.
    static let qresync = """
        import imaplib, ssl, sys
        port, ca, modseq = int(sys.argv[1]), sys.argv[2], sys.argv[3]
        m = imaplib.IMAP4_SSL("127.0.0.1", port, ssl_context=ssl.create_default_context(cafile=ca))
        m.login("alice", "password-alice")
        assert m._simple_command("ENABLE", "QRESYNC")[0] == "OK"
        m.select("INBOX")
        validity = m.untagged_responses["UIDVALIDITY"][0].decode()
        m.close()
        typ, _ = m._simple_command("SELECT", "INBOX", f"(QRESYNC ({validity} {modseq}))")
        assert typ == "OK", typ
        m.logout()
        """

    /// Python's imaplib as a mail app marking the newest message read: LOGIN, SELECT INBOX, STORE +FLAGS (\\Seen).
    /// Arguments: port, CA.
    static let store = """
        import imaplib, ssl, sys
        m = imaplib.IMAP4_SSL("127.0.0.1", int(sys.argv[1]), ssl_context=ssl.create_default_context(cafile=sys.argv[2]))
        m.login("alice", "password-alice")
        typ, data = m.select("INBOX")
        assert typ == "OK", typ
        typ, _ = m.store(data[0].decode(), "+FLAGS", "(\\\\Seen)")
        assert typ == "OK", typ
        m.logout()
        """

    static func attribute(_ span: [String: Any], _ key: String) -> Any? {
        (span["attributes"] as? [String: Any])?[key]
    }

    static func number(_ value: Any?) -> Int64? {
        (value as? NSNumber)?.int64Value ?? (value as? String).flatMap { Int64($0) }
    }

    @Test func aDeliveryToADeviceOnEachServiceIsOneTraceAcrossTwoInstances() async throws {
        let plain = HTTPClient(configuration: .init(httpVersion: .http1))
        defer { plain.shutdown() }
        let database = try PostgresServer.shared().makeDatabase()
        let logs = FileManager.default.temporaryDirectory.path
        let receiver = try await offPool { try Receiver(directory: logs) }
        let cluster = try await Cluster.start(
            accounts: [],
            mailboxdArguments: [
                "--database", database, "--otlp-endpoint", receiver.url, "--imap-listen", "127.0.0.1:0",
            ],
            fcm: true, webpush: true)
        let (other, otherPort) = try await offPool { try cluster.startAnotherMailboxd(instanceID: "trace-b") }
        defer { other.stop() }
        try await cluster.addAccount("alice", database: database)
        let session = try await cluster.login("alice")
        _ = try await cluster.registerDevice(session: session)
        _ = try await cluster.registerAndroidDevice(session: session)
        _ = try await cluster.registerBrowser(session: session)
        let before = try #require(
            try await cluster.call(.get, cluster.api + "/v1/mailboxes", token: session).body["state"] as? String)

        // Through the second instance, with a caller's trace context and content that must go nowhere.
        let canary = "canary\(UUID().uuidString.prefix(8))"
        let caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let delivered = try await cluster.call(
            .post, "https://127.0.0.1:\(otherPort)/v1/deliveries", token: cluster.deliveryToken,
            json: [
                "to": "alice", "from": "\(canary)@example.com", "subject": "Subject \(canary)",
                "body": "Body \(canary)",
            ], extraHeaders: [("traceparent", caller)])
        try #require(delivered.status == 201)
        let state = try #require(delivered.body["state"] as? String)
        let modseq = try #require(Int64(state.split(separator: "-").last ?? ""))

        // The arrival names the trace; the three signals join it from whichever instance sent them.
        var trace = ""
        let signalled = try await eventually {
            let spans = try await receiver.spans(plain)
            guard
                let arrival = spans.first(where: {
                    $0["name"] as? String == "arrival api"
                        && Self.number(Self.attribute($0, "signalfetch.modseq")) == modseq
                })
            else { return false }
            trace = arrival["traceId"] as? String ?? ""
            let services = Set(
                spans.filter {
                    $0["traceId"] as? String == trace
                        && Self.attribute($0, "signalfetch.signal.outcome") as? String == "sent"
                }.compactMap { Self.attribute($0, "signalfetch.push.service") as? String })
            return services == ["apns", "fcm", "webpush"]
        }
        #expect(signalled, "no signal span for each service: \(cluster.mailboxd.errorOutput) \(other.errorOutput)")

        // The device fetches through the first instance.
        let since = try #require(before.split(separator: "-").last)
        let changes = try await cluster.call(.get, cluster.api + "/v1/changes?since=\(before)", token: session)
        #expect(changes.status == 200 && changes.body["newState"] as? String == state, "from \(since)")
        // And a mail app resynchronizes over IMAP (SELECT with QRESYNC from the HIGHESTMODSEQ it had: the account's
        // modseq plus one).
        let resync = try Subprocess.run(
            TestEnvironment.python,
            [
                "-c", Self.qresync, String(try #require(cluster.imapPort)), cluster.ca,
                String(try #require(Int64(since)) + 1),
            ])
        #expect(resync.status == 0, "\(resync.stdout) \(resync.stderr)")
        var spans: [[String: Any]] = []
        #expect(
            try await eventually {
                spans = try await receiver.spans(plain).filter { $0["traceId"] as? String == trace }
                return spans.filter { $0["name"] as? String == "fetch" }.count == 2
            }, "no fetch spans")

        func one(_ name: String) throws -> [String: Any] {
            let found = spans.filter { $0["name"] as? String == name }
            try #require(found.count == 1, "\(found.count) spans named \(name) in \(spans.map { $0["name"] ?? "" })")
            return found[0]
        }
        let arrival = try one("arrival api")
        let commit = try one("commit")
        let fetches = spans.filter { $0["name"] as? String == "fetch" }
        let fetch = try #require(fetches.first { Self.attribute($0, "signalfetch.fetch.path") as? String == "api" })
        let imap = try #require(fetches.first { Self.attribute($0, "signalfetch.fetch.path") as? String == "imap" })
        #expect(imap["parentSpanId"] as? String == commit["spanId"] as? String)
        #expect(Self.number(Self.attribute(imap, "signalfetch.fetch.since")) == Int64(since))
        let signals = spans.filter { ($0["name"] as? String)?.hasPrefix("signal ") == true }
        // Parent and child: arrival → commit → each signal and the fetch.
        #expect((arrival["parentSpanId"] as? String)?.isEmpty == true)
        #expect(commit["parentSpanId"] as? String == arrival["spanId"] as? String)
        for child in signals + [fetch] { #expect(child["parentSpanId"] as? String == commit["spanId"] as? String) }
        // In the order they happened.
        let start = { (span: [String: Any]) in Self.number(span["start"]) ?? 0 }
        #expect(start(arrival) <= start(commit))
        for signal in signals { #expect(start(commit) <= start(signal) && start(signal) <= start(fetch)) }
        // The caller's span is linked from the arrival; the fetch links the change it asked from.
        #expect((arrival["links"] as? [[String: Any]])?.first?["spanId"] as? String == "00f067aa0ba902b7")
        #expect(Self.number(Self.attribute(fetch, "signalfetch.fetch.since")) == Int64(since))
        // Written by both instances: the arrival and commit by the second, the fetch by the first.
        let instances = { (span: [String: Any]) in
            (span["resource"] as? [String: Any])?["service.instance.id"] as? String
        }
        #expect(instances(arrival) == "trace-b" && instances(commit) == "trace-b")
        #expect(instances(fetch) == "cluster-mailboxd")
        #expect(spans.allSatisfy { ($0["resource"] as? [String: Any])?["service.name"] as? String == "mailboxd" })

        // Content-free: nothing any span or resource holds names the message, the account or a device's token.
        let everything = try await plain.execute(HTTPClient.Request(url: receiver.url + "/spans"))
        let text = String(decoding: everything.body, as: UTF8.self)
        for secret in [canary, "alice", "example.com", "Subject", "Body"] {
            #expect(!text.contains(secret), "\(secret) in an exported span")
        }
        // Writes are arrivals too: a JMAP Email/set through the second instance, an IMAP STORE through the first.
        let messageID = try #require(delivered.body["id"] as? String)
        let jmapSession = try await cluster.call(.get, cluster.api + "/.well-known/jmap", token: session)
        let accountID = try #require(
            (jmapSession.body["primaryAccounts"] as? [String: Any])?["urn:ietf:params:jmap:mail"] as? String)
        let set = try await cluster.call(
            .post, "https://127.0.0.1:\(otherPort)/jmap/api", token: session,
            json: [
                "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
                "methodCalls": [
                    ["Email/set", ["accountId": accountID, "update": [messageID: ["keywords/$flagged": true]]], "s"]
                ],
            ])
        #expect(set.status == 200, "\(set.body)")
        let store = try Subprocess.run(
            TestEnvironment.python, ["-c", Self.store, String(try #require(cluster.imapPort)), cluster.ca])
        #expect(store.status == 0, "\(store.stdout) \(store.stderr)")
        for (kind, instance) in [("jmap", "trace-b"), ("imap", "cluster-mailboxd")] {
            var written: [[String: Any]] = []
            #expect(
                try await eventually {
                    let all = try await receiver.spans(plain)
                    guard let arrival = all.first(where: { $0["name"] as? String == "arrival \(kind)" }) else {
                        return false
                    }
                    written = all.filter { $0["traceId"] as? String == arrival["traceId"] as? String }
                    return written.contains { $0["name"] as? String == "commit" }
                }, "no arrival \(kind) with its commit")
            let arrival = try #require(written.first { $0["name"] as? String == "arrival \(kind)" })
            let commit = try #require(written.first { $0["name"] as? String == "commit" })
            #expect(commit["parentSpanId"] as? String == arrival["spanId"] as? String)
            #expect(instances(arrival) == instance)
        }

        let requests = try await plain.execute(HTTPClient.Request(url: receiver.url + "/requests"))
        #expect(String(decoding: requests.body, as: UTF8.self).contains(#""refused": 0"#))
    }

    @Test func aCollectorThatCannotBeReachedCostsNoDeliveryAndIsCounted() async throws {
        // The receiver, down: started for its port, then stopped.
        let receiver = try await offPool { try Receiver(directory: FileManager.default.temporaryDirectory.path) }
        _ = receiver.process.stop()
        let cluster = try await Cluster.start(
            accounts: ["alice"], mailboxdArguments: ["--otlp-endpoint", receiver.url])
        let session = try await cluster.login("alice")
        let device = try await cluster.registerDevice(session: session)
        let notifications = try await cluster.notifications(device)
        for index in 0..<3 {
            let receipt = try await cluster.deliver(to: "alice", subject: "s\(index)", body: "b")
            let state = try #require(receipt["state"] as? String)
            let tag = try #require(cluster.tag(of: state, device: device))
            #expect(await notifications.waitForLastTag(tag), "the signal for delivery \(index)")
        }
        #expect(
            try await eventually {
                let text = String(decoding: try await cluster.call(.get, cluster.metrics).data, as: UTF8.self)
                return FCMSignalThenFetchTests.metric(
                    text, #"mailboxd_trace_spans_dropped_total{reason="unreachable"}"#)
                    > 0
            }, "drops are counted")
        #expect(cluster.mailboxd.errorOutput.contains("tracing: spans dropped: the collector cannot be reached"))
    }
}
