import Foundation
import HTTPClient
import Locking
import ServerSentEvents
import TestSupport
import Testing

/// Reloading without a restart (SIGHUP, `mailboxd reload --pid-file`): a renewed certificate is served to new
/// connections of every listener while a stream opened before keeps going, a new delivery token takes over, and a
/// broken certificate is refused with the one served kept.
@Suite(.serialized) struct ReloadTests {
    /// The SHA-256 of the certificate a new connection to each port gets.
    static func fingerprints(_ ports: [UInt16]) throws -> [String] {
        let result = try Subprocess.run(
            TestEnvironment.python, [TestEnvironment.peer("tls_fingerprint.py")] + ports.map(String.init))
        try #require(result.status == 0, "tls_fingerprint.py: \(result.stderr)")
        return result.stdout.split(separator: "\n").map(String.init)
    }

    /// The SHA-256 of the certificate in a PEM file, as tls_fingerprint.py prints it.
    static func fingerprint(ofPEM path: String) throws -> String {
        let result = try Subprocess.run(
            "/usr/bin/openssl", ["x509", "-in", path, "-noout", "-fingerprint", "-sha256"])
        try #require(result.status == 0, "\(result.stderr)")
        let hex = result.stdout.split(separator: "=").last.map(String.init) ?? ""
        return hex.replacingOccurrences(of: ":", with: "").trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
    }

    /// A new server certificate and key from the dev CA (`localhost`, `127.0.0.1`), written where mailboxd reads its
    /// own, each file replaced whole.
    static func renewCertificate(_ cluster: Cluster) throws {
        let tls = cluster.dataDir + "/tls"
        let work = cluster.directory.path("renewal")
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        let extensions = work + "/san.cnf"
        try "subjectAltName = DNS:localhost, IP:127.0.0.1\n".write(
            toFile: extensions, atomically: true, encoding: .utf8)
        let steps: [[String]] = [
            ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", work + "/server.key"],
            ["req", "-new", "-key", work + "/server.key", "-subj", "/CN=localhost", "-out", work + "/server.csr"],
            [
                "x509", "-req", "-in", work + "/server.csr", "-CA", tls + "/ca.pem", "-CAkey", tls + "/ca.key",
                "-CAcreateserial", "-days", "2", "-extfile", extensions, "-out", work + "/server.pem",
            ],
        ]
        for step in steps {
            let result = try Subprocess.run("/usr/bin/openssl", step)
            try #require(result.status == 0, "openssl \(step[0]): \(result.stderr)")
        }
        for name in ["server.key", "server.pem"] {
            try #require(rename(work + "/" + name, tls + "/" + name) == 0, "rename \(name): \(errno)")
        }
    }

    static func reload(_ pidFile: String) throws {
        let result = try Subprocess.run(
            TestEnvironment.executable("mailboxd").path, ["reload", "--pid-file", pidFile])
        try #require(result.status == 0, "mailboxd reload: \(result.stdout) \(result.stderr)")
    }

    @Test func aRenewedCertificateReachesNewConnectionsWhileAnOpenStreamKeepsGoing() async throws {
        let pidFile = FileManager.default.temporaryDirectory.appendingPathComponent("reload-\(UUID()).pid").path
        let cluster = try await Cluster.start(
            accounts: ["alice"],
            mailboxdArguments: [
                "--imap-listen", "127.0.0.1:0", "--jmap-ws-listen", "127.0.0.1:0", "--pid-file", pidFile,
            ])
        let ports = [cluster.apiPort, try #require(cluster.imapPort), try #require(cluster.jmapWebSocketPort)]
        let served = try Self.fingerprint(ofPEM: cluster.dataDir + "/tls/server.pem")
        #expect(try await offPool { try Self.fingerprints(ports) } == [served, served, served])

        // A JMAP event stream, opened before the reload, on a connection that will keep the old certificate.
        let token = try await cluster.login("alice")
        let stream = try await cluster.client.stream(
            HTTPClient.Request(
                url: cluster.api + "/jmap/eventsource?types=*&closeafter=no&ping=0",
                headers: ["Authorization": "Bearer \(token)"]))
        try #require(stream.status == 200)
        let events = LockedLines()
        let reader = Task {
            do {
                for try await event in stream.body.serverSentEvents where event.event == "state" {
                    events.append(event.data)
                }
            } catch {}
        }
        defer {
            reader.cancel()
            stream.cancel()
        }
        _ = try await cluster.deliver(to: "alice", subject: "before the reload", body: "b")
        try #require(await eventually { events.count >= 1 })

        try Self.renewCertificate(cluster)
        let renewed = try Self.fingerprint(ofPEM: cluster.dataDir + "/tls/server.pem")
        #expect(renewed != served)
        try Self.reload(pidFile)
        try #require(await eventually { cluster.mailboxd.errorOutput.contains("mailboxd: reloaded") })
        #expect(try await offPool { try Self.fingerprints(ports) } == [renewed, renewed, renewed])
        #expect(
            cluster.mailboxd.errorOutput.contains(
                "the API's certificate, IMAP's certificate, the JMAP WebSocket certificate"))

        // The stream opened before is still up and hears the next change.
        let heard = events.count
        _ = try await cluster.deliver(to: "alice", subject: "after the reload", body: "b")
        try #require(await eventually { events.count > heard })

        // A broken certificate: refused, said why, counted; the one served stays.
        try "not a certificate\n".write(toFile: cluster.dataDir + "/tls/server.pem", atomically: true, encoding: .utf8)
        try Self.reload(pidFile)
        try #require(
            await eventually { cluster.mailboxd.errorOutput.contains("mailboxd: reload kept what it had for") })
        #expect(try await offPool { try Self.fingerprints(ports) } == [renewed, renewed, renewed])
        let metrics = try await cluster.call(.get, cluster.metrics)
        let page = String(decoding: metrics.data, as: UTF8.self)
        #expect(page.contains("mailboxd_reloads_total{outcome=\"applied\"} 1"), "\(page)")
        #expect(page.contains("mailboxd_reloads_total{outcome=\"refused\"} 1"), "\(page)")
    }

    /// The delivery token is read again: the new one delivers, the old one is refused.
    @Test func aNewDeliveryTokenTakesOverTheOldOne() async throws {
        let pidFile = FileManager.default.temporaryDirectory.appendingPathComponent("reload-\(UUID()).pid").path
        let cluster = try await Cluster.start(accounts: ["alice"], mailboxdArguments: ["--pid-file", pidFile])
        let body: [String: Any] = ["to": "alice", "from": "a@example.com", "subject": "s", "body": "b"]
        let replacement = "a-new-delivery-token-\(UUID().uuidString)"
        try (replacement + "\n").write(toFile: cluster.dataDir + "/delivery-token", atomically: true, encoding: .utf8)
        try Self.reload(pidFile)
        try #require(await eventually { cluster.mailboxd.errorOutput.contains("the delivery token") })
        let old = try await cluster.call(
            .post, cluster.api + "/v1/deliveries", token: cluster.deliveryToken, json: body)
        #expect(old.status == 401)
        let new = try await cluster.call(.post, cluster.api + "/v1/deliveries", token: replacement, json: body)
        #expect(new.status == 201)
        // The pid file goes with the process.
        #expect(try await offPool { cluster.mailboxd.stop(signal: SIGTERM, timeout: 30) } == 0)
        #expect(!FileManager.default.fileExists(atPath: pidFile))
    }

    /// The APNs configuration of the test below: the mail app signed with `mailKey`, and the notes app with the
    /// second key when `notes`.
    static func apnsConfig(
        data: String, production: String, sandbox: String, mailKey: (p8: String, keyID: String, teamID: String),
        notes: AppsAndEnvironmentsTests.SecondKey?
    ) -> String {
        let notesApp =
            notes.map {
                #", {"topic": "\#(AppsAndEnvironmentsTests.notes)", "keyFile": "\#($0.p8)", "keyId": "\#($0.keyID)", "teamId": "\#($0.teamID)"}"#
            } ?? ""
        return """
            {"endpoints": {"production": "\(production)", "sandbox": "\(sandbox)"}, "ca": "\(data)/tls/ca.pem",
             "apps": [{"topic": "\(AppsAndEnvironmentsTests.mail)", "keyFile": "\(mailKey.p8)", "keyId": "\(mailKey.keyID)",
                       "teamId": "\(mailKey.teamID)"}\(notesApp)]}
            """
    }

    /// The key ids of the provider tokens the store holds (each token's JWT header names its `kid`).
    static func providerTokenKeyIDs(_ database: String) throws -> Set<String> {
        let script = """
            import base64, json, sqlite3, sys
            for (token,) in sqlite3.connect(sys.argv[1]).execute("SELECT token FROM provider_tokens"):
                header = token.split(".")[0]
                print(json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))["kid"])
            """
        let result = try Subprocess.run(TestEnvironment.python, ["-c", script, database])
        try #require(result.status == 0, "\(result.stderr)")
        return Set(result.stdout.split(separator: "\n").map(String.init))
    }

    /// The push configuration is read again: a new app is signalled, a rotated APNs key signs the next provider
    /// token, a new VAPID key is what new browsers subscribe with while a browser subscribed for the old one is
    /// still signed with it, and a broken file keeps what was there.
    @Test func appsKeysAndTheVAPIDKeyAreReloadedWithoutARestart() async throws {
        let pidFile = FileManager.default.temporaryDirectory.appendingPathComponent("reload-\(UUID()).pid").path
        let second = try AppsAndEnvironmentsTests.SecondKey()
        let cluster = try await Cluster.start(
            accounts: ["alice"], mailboxdArguments: ["--pid-file", pidFile],
            simArguments: ["--provider-key", "\(second.keyID):\(second.teamID):\(second.publicKey)"],
            apnsConfig: { data, production, sandbox in
                let read = { (name: String) in
                    ((try? String(contentsOfFile: data + "/apns/" + name, encoding: .utf8)) ?? "")
                        .trimmingCharacters(in: .whitespacesAndNewlines)
                }
                return Self.apnsConfig(
                    data: data, production: production, sandbox: sandbox,
                    mailKey: (data + "/apns/key.p8", read("key-id"), read("team-id")), notes: nil)
            }, webpush: true)
        let data = cluster.dataDir
        let (production, sandbox) = (
            "https://127.0.0.1:\(cluster.providerPort)", "https://127.0.0.1:\(cluster.sandboxPort)"
        )
        let session = try await cluster.login("alice")
        let mail = try await cluster.registerDevice(session: session, topic: AppsAndEnvironmentsTests.mail)
        let unknown = try await cluster.call(
            .post, cluster.api + "/v1/devices", token: session,
            json: [
                "token": String(repeating: "cd", count: 32), "topic": AppsAndEnvironmentsTests.notes,
                "environment": "sandbox",
            ])
        #expect(unknown.status == 400 && unknown.body["error"] as? String == "unknownTopic")
        let oldVAPID = try await cluster.call(.get, cluster.api + "/v1/webpush/vapid-public-key").body["publicKey"]
        let before = try await cluster.registerBrowser(session: session)
        let firstKeyID = try Self.providerTokenKeyIDs(data + "/mailbox.sqlite")

        // The mail app's key rotated to the second, the notes app added, a new VAPID key.
        let config = cluster.directory.path("apns-config.json")
        try Self.apnsConfig(
            data: data, production: production, sandbox: sandbox, mailKey: (second.p8, second.keyID, second.teamID),
            notes: second
        ).write(toFile: config, atomically: true, encoding: .utf8)
        let vapid = cluster.directory.path("vapid-new.pem")
        let generated = try Subprocess.run(
            "/usr/bin/openssl", ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", vapid])
        try #require(generated.status == 0, "\(generated.stderr)")
        try #require(rename(vapid, data + "/webpush/vapid.pem") == 0)
        try Self.reload(pidFile)
        try #require(await eventually { cluster.mailboxd.errorOutput.contains("the push configuration (") })

        let newVAPID = try await cluster.call(.get, cluster.api + "/v1/webpush/vapid-public-key").body["publicKey"]
        #expect(newVAPID as? String != nil && newVAPID as? String != oldVAPID as? String)
        let notes = try await cluster.registerDevice(
            session: session, topic: AppsAndEnvironmentsTests.notes, environment: "production")
        let after = try await cluster.registerBrowser(session: session)
        let streams = (mail: try await cluster.notifications(mail), notes: try await cluster.notifications(notes))
        let browsers = (
            before: try await WebPushSignalThenFetchTests().messages(cluster, before.id),
            after: try await WebPushSignalThenFetchTests().messages(cluster, after.id)
        )
        let receipt = try await cluster.deliver(to: "alice", subject: "after the reload", body: "b")
        let state = try #require(receipt["state"] as? String)
        #expect(await streams.mail.waitForLastTag(try #require(cluster.tag(of: state, device: mail))))
        #expect(await streams.notes.waitForLastTag(try #require(cluster.tag(of: state, device: notes))))
        let beforeTag = try #require(cluster.tag(of: state, device: before.id))
        let afterTag = try #require(cluster.tag(of: state, device: after.id))
        #expect(await browsers.before.waitFor(tag: beforeTag) != nil, "the old subscription, with the old key")
        #expect(await browsers.after.waitFor(tag: afterTag) != nil, "the new subscription, with the new key")
        let keyIDs = try Self.providerTokenKeyIDs(data + "/mailbox.sqlite")
        #expect(keyIDs.contains(second.keyID) && !firstKeyID.contains(second.keyID), "\(firstKeyID) → \(keyIDs)")

        // A broken file: refused, said why, counted; the apps stay as they were.
        try "{ not json".write(toFile: config, atomically: true, encoding: .utf8)
        try Self.reload(pidFile)
        try #require(
            await eventually {
                cluster.mailboxd.errorOutput.contains("mailboxd: reload kept what it had for the push configuration")
            })
        let again = try await cluster.deliver(to: "alice", subject: "after the broken reload", body: "b")
        let againState = try #require(again["state"] as? String)
        #expect(await streams.notes.waitForLastTag(try #require(cluster.tag(of: againState, device: notes))))
        let page = String(decoding: try await cluster.call(.get, cluster.metrics).data, as: UTF8.self)
        #expect(page.contains("mailboxd_reloads_total{outcome=\"refused\"} 1"), "\(page)")
    }
}

/// Lines appended by one task and read by another.
final class LockedLines: Sendable {
    private let lines = LockedValue<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var count: Int { lines.withLock { $0.count } }
}
