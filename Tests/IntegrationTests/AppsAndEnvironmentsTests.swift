import Foundation
import HTTPClient
import TestSupport
import Testing

/// One mailboxd serving two apps and both APNs environments against the apns-sim binary with a production and
/// a sandbox listener.
@Suite(.serialized) struct AppsAndEnvironmentsTests {
    static let mail = "com.example.signalfetch"
    static let notes = "com.example.signalfetch.notes"

    /// A second signing key (another dev-setup's), for the second app.
    struct SecondKey {
        let directory: TemporaryDirectory
        let keyID: String
        let teamID: String
        var p8: String { directory.path("data/apns/key.p8") }
        var publicKey: String { directory.path("data/apns/key.pub.pem") }

        init() throws {
            directory = try TemporaryDirectory(prefix: "second-key")
            let data = directory.path("data")
            let setup = try Subprocess.run(
                TestEnvironment.executable("mailboxd").path, ["dev-setup", "--data-dir", data])
            try #require(setup.status == 0, "dev-setup: \(setup.stderr)")
            keyID = try String(contentsOfFile: data + "/apns/key-id", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            teamID = try String(contentsOfFile: data + "/apns/team-id", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    static func metricsText(_ cluster: Cluster) async throws -> String {
        String(decoding: try await cluster.call(.get, cluster.metrics).data, as: UTF8.self)
    }

    static func log(_ cluster: Cluster) async throws -> [[String: Any]] {
        let log = try await cluster.call(.get, cluster.sim + "/sim/log")
        return (try JSONSerialization.jsonObject(with: log.data) as? [[String: Any]]) ?? []
    }

    @Test func twoAppsAndBothEnvironmentsEachDeviceOnItsListenerWithItsTopic() async throws {
        let second = try SecondKey()
        let cluster = try await Cluster.start(
            simArguments: ["--provider-key", "\(second.keyID):\(second.teamID):\(second.publicKey)"],
            apnsConfig: { data, production, sandbox in
                let keyID =
                    (try? String(contentsOfFile: data + "/apns/key-id", encoding: .utf8))?
                    .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
                let teamID =
                    (try? String(contentsOfFile: data + "/apns/team-id", encoding: .utf8))?
                    .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
                return """
                    {"endpoints": {"production": "\(production)", "sandbox": "\(sandbox)"},
                     "ca": "\(data)/tls/ca.pem",
                     "apps": [
                       {"topic": "\(Self.mail)", "keyFile": "\(data)/apns/key.p8", "keyId": "\(keyID)",
                        "teamId": "\(teamID)"},
                       {"topic": "\(Self.notes)", "keyFile": "\(second.p8)", "keyId": "\(second.keyID)",
                        "teamId": "\(second.teamID)", "signalKind": "background"}]}
                    """
            })
        let session = try await cluster.login("alice")
        let mailToken = try await cluster.registerDevice(session: session, topic: Self.mail, environment: "sandbox")
        let notesToken = try await cluster.registerDevice(
            session: session, topic: Self.notes, environment: "production")
        let unknown = try await cluster.call(
            .post, cluster.api + "/v1/devices", token: session,
            json: [
                "token": String(repeating: "ab", count: 32), "topic": "com.example.unknown", "environment": "sandbox",
            ])
        let mailStream = try await cluster.notifications(mailToken)
        let notesStream = try await cluster.notifications(notesToken)
        _ = await mailStream.waitFor(count: 1)
        _ = await notesStream.waitFor(count: 1)
        let before = (mailStream.payloads.count, notesStream.payloads.count)
        _ = try await cluster.deliver(to: "alice", subject: "Two apps", body: "one signal each")
        let mailPayloads = await mailStream.waitFor(count: before.0 + 1)
        let notesPayloads = await notesStream.waitFor(count: before.1 + 1)
        let log = try await Self.log(cluster)
        let metrics = try await Self.metricsText(cluster)

        #expect(unknown.status == 400)
        #expect(unknown.body["error"] as? String == "unknownTopic")
        #expect((unknown.body["message"] as? String)?.isEmpty == false)
        #expect(mailPayloads.count == before.0 + 1 && notesPayloads.count == before.1 + 1)
        #expect(((mailPayloads.last?["aps"] as? [String: Any])?["badge"] as? Int) == 1)
        #expect(
            (notesPayloads.last?["aps"] as? [String: Any])?["badge"] == nil, "the notes app gets background signals")
        let mailEntries = log.filter { $0["deviceToken"] as? String == mailToken }
        let notesEntries = log.filter { $0["deviceToken"] as? String == notesToken }
        #expect(!mailEntries.isEmpty && !notesEntries.isEmpty)
        for entry in mailEntries {
            #expect(entry["environment"] as? String == "sandbox" && entry["status"] as? Int == 200)
            #expect((entry["headers"] as? [String: String])?["apns-topic"] == Self.mail)
        }
        for entry in notesEntries {
            #expect(entry["environment"] as? String == "production" && entry["status"] as? Int == 200)
            let headers = entry["headers"] as? [String: String]
            #expect(headers?["apns-topic"] == Self.notes && headers?["apns-push-type"] == "background")
        }
        #expect(
            metrics.contains(#"mailboxd_signals_sent_total{service="apns",app="\#(Self.mail)",environment="sandbox"}"#))
        #expect(
            metrics.contains(
                #"mailboxd_signals_sent_total{service="apns",app="\#(Self.notes)",environment="production"}"#))
        #expect(!metrics.contains("TooManyProviderTokenUpdates"))
    }

    @Test func aProductionTokenSentToTheSandboxIsDroppedAfterBadDeviceToken() async throws {
        let cluster = try await Cluster.start()
        let session = try await cluster.login("alice")
        // An App Store build's token registered as if it came from a development build.
        let wrong = try await cluster.registerDevice(
            session: session, environment: "sandbox", simEnvironment: "production")
        let right = try await cluster.registerDevice(session: session, environment: "sandbox")
        let stream = try await cluster.notifications(right)
        _ = await stream.waitFor(count: 1)
        let before = stream.payloads.count
        _ = try await cluster.deliver(to: "alice", subject: "first", body: "one")
        _ = await stream.waitFor(count: before + 1)
        // The first refusal removes the registration: later changes send nothing more to that token.
        var refusals: [[String: Any]] = []
        _ = try await eventually {
            refusals = try await Self.log(cluster).filter {
                $0["deviceToken"] as? String == wrong && $0["reason"] as? String == "BadDeviceToken"
            }
            return !refusals.isEmpty
        }
        #expect(
            await eventually { cluster.mailboxd.errorOutput.contains("removed: BadDeviceToken") },
            "the registration was not removed: \(cluster.mailboxd.errorOutput)")
        // Two more changes. The dispatcher sends the third's signal only after every send for the second has
        // finished, so a send to the removed token for the second would be in the log by then.
        _ = try await cluster.deliver(to: "alice", subject: "second", body: "two")
        _ = await stream.waitFor(count: before + 2)
        _ = try await cluster.deliver(to: "alice", subject: "third", body: "three")
        let payloads = await stream.waitFor(count: before + 3)
        let wrongEntries = try await Self.log(cluster).filter { $0["deviceToken"] as? String == wrong }
        let metrics = try await Self.metricsText(cluster)

        #expect(payloads.count >= before + 3, "the rightly registered device keeps getting signals")
        #expect(refusals.first?["environment"] as? String == "sandbox")
        #expect(wrongEntries.count == 1, "one refused send, then the registration is gone: \(wrongEntries.count)")
        #expect(
            metrics.contains(
                #"mailboxd_signals_failed_total{service="apns",app="\#(Cluster.topic)",environment="sandbox",reason="BadDeviceToken"} 1"#
            ))
        #expect(cluster.mailboxd.errorOutput.contains("removed"))
    }

    @Test func apnsCheckReportsTheAnswerAndItsLikelyCause() async throws {
        let cluster = try await Cluster.start()
        func simDevice(_ environment: String) async throws -> String {
            let created = try await cluster.call(
                .post, cluster.sim + "/sim/devices", json: ["topic": Cluster.topic, "environment": environment])
            return try #require(created.body["deviceToken"] as? String)
        }
        let sandboxToken = try await simDevice("sandbox")
        let productionToken = try await simDevice("production")
        let mailboxd = TestEnvironment.executable("mailboxd").path
        let flags = [
            "apns-check", "--data-dir", cluster.dataDir, "--apns-url", "https://127.0.0.1:\(cluster.providerPort)",
            "--apns-sandbox-url", "https://127.0.0.1:\(cluster.sandboxPort)", "--apns-ca", cluster.ca,
            "--apns-topic", Cluster.topic,
        ]
        let accepted = try await offPool {
            try Subprocess.run(mailboxd, flags + ["--token", sandboxToken, "--environment", "sandbox"])
        }
        let crossed = try await offPool {
            try Subprocess.run(mailboxd, flags + ["--token", productionToken, "--environment", "sandbox"])
        }
        let production = try await offPool {
            try Subprocess.run(mailboxd, flags + ["--token", productionToken, "--environment", "production"])
        }
        let unknownTopic = try await offPool {
            try Subprocess.run(
                mailboxd, flags + ["--token", sandboxToken, "--environment", "sandbox", "--topic", "com.example.x"])
        }
        #expect(accepted.status == 0, "\(accepted.stdout) \(accepted.stderr)")
        #expect(accepted.stdout.contains("accepted: 200") && accepted.stdout.contains("apns-unique-id"))
        #expect(crossed.status == 1)
        #expect(crossed.stdout.contains("refused: 400 BadDeviceToken"))
        #expect(crossed.stdout.contains("likely cause: the token belongs to the other environment"))
        #expect(production.status == 0 && !production.stdout.contains("apns-unique-id"))
        #expect(
            unknownTopic.status == 2 && unknownTopic.stderr.contains("no configured app has the topic"),
            "exit \(unknownTopic.status): \(unknownTopic.stderr.prefix(300))")
    }

    @Test func aBadConfigurationIsAClearStartUpError() async throws {
        let directory = try TemporaryDirectory(prefix: "bad-config")
        let mailboxd = TestEnvironment.executable("mailboxd").path
        let data = directory.path("data")
        _ = try Subprocess.run(mailboxd, ["dev-setup", "--data-dir", data])
        let unknownField = directory.path("unknown.json")
        try #"{"apps": [{"topic": "com.example.a", "keyFile": "k.p8", "keyId": "K", "teamId": "T", "env": 1}]}"#
            .write(toFile: unknownField, atomically: true, encoding: .utf8)
        let missingKey = directory.path("missing.json")
        try #"{"apps": [{"topic": "com.example.a", "keyFile": "nowhere.p8", "keyId": "K", "teamId": "T"}]}"#
            .write(toFile: missingKey, atomically: true, encoding: .utf8)
        let serve = ["serve", "--data-dir", data, "--listen", "127.0.0.1:0"]
        let first = try Subprocess.run(mailboxd, serve + ["--apns-config", unknownField])
        let second = try Subprocess.run(mailboxd, serve + ["--apns-config", missingKey])
        let clash = try Subprocess.run(
            mailboxd, serve + ["--apns-config", missingKey, "--apns-topic", "com.example.a"])
        let badURL = try Subprocess.run(
            mailboxd, serve + ["--apns-topic", "com.example.a", "--apns-sandbox-url", "apns"])
        let localCAOnly = try Subprocess.run(
            mailboxd,
            serve + [
                "--apns-topic", "com.example.a", "--apns-url", "https://127.0.0.1:9", "--apns-ca", data + "/tls/ca.pem",
            ])
        for result in [first, second, clash, badURL, localCAOnly] {
            #expect(result.status == 2, "exit \(result.status): \(result.stderr)")
        }
        #expect(first.stderr.contains("unknown field 'apps[0].env'"))
        #expect(second.stderr.contains("nowhere.p8") && second.stderr.contains("cannot be read"))
        #expect(clash.stderr.contains("leave out --apns-topic"))
        #expect(badURL.stderr.contains("sandbox endpoint"))
        #expect(localCAOnly.stderr.contains("give --apns-sandbox-url too"))
    }
}
