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
            HTTPRequest(
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
}

/// Lines appended by one task and read by another.
final class LockedLines: Sendable {
    private let lines = LockedValue<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var count: Int { lines.withLock { $0.count } }
}
