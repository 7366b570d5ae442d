import Foundation
import TestSupport
import Testing

/// The real `fcm-sim` binary on loopback TLS with Google's own Python SDKs as senders: firebase-admin
/// (`messaging.send`, HTTP/1.1 over `requests`, google-auth's JWT-bearer grant) and pyfcm 2.x; curl checks that
/// HTTP/2 and HTTP/1.1 share the provider port.
@Suite("Real SDKs against the fcm-sim binary")
struct SDKConformanceTests {
    static let project = "signalfetch-dev"
    static let otherProject = "other-project"

    @Test func firebaseAdminErrorsMapToTheSDKsExceptions() async throws {
        let main = TestServiceAccount(project: Self.project)
        let other = TestServiceAccount(project: Self.otherProject, keyIndex: 1)
        let simulator = try await RunningFCMSimulator.start(accounts: [main, other])
        let live = try await simulator.registerDevice(project: Self.project)
        let uninstalled = try await simulator.registerDevice(project: Self.project)
        let foreign = try await simulator.registerDevice(project: Self.otherProject)
        let quota = try await simulator.registerDevice(project: Self.project)
        let quotaRetry = try await simulator.registerDevice(project: Self.project)
        let unavailable = try await simulator.registerDevice(project: Self.project)
        #expect(try await simulator.device("DELETE", "/sim/devices/\(uninstalled)").0 == 204)
        #expect(
            try await simulator.device(
                "PUT", "/sim/devices/\(quota)/error", #"{"status":429,"errorCode":"QUOTA_EXCEEDED"}"#
            )
            .0 == 200)
        #expect(
            try await simulator.device(
                "PUT", "/sim/devices/\(quotaRetry)/error",
                #"{"status":429,"errorCode":"QUOTA_EXCEEDED","retryAfter":1}"#
            ).0 == 200)
        #expect(
            try await simulator.device(
                "PUT", "/sim/devices/\(unavailable)/error", #"{"status":503,"errorCode":"UNAVAILABLE"}"#
            )
            .0 == 200)
        let stream = try await simulator.openStream(live)
        defer { stream.stop(signal: SIGKILL) }

        let results = try await simulator.runPeer(
            "fcm_firebase_admin.py",
            plan: simulator.plan(sends: [
                [
                    "case": "ok", "token": live, "data": ["acct": "a1", "st": "tag1"], "collapseKey": "mail",
                    "ttl": 3600,
                ],
                ["case": "unregistered", "token": uninstalled, "data": ["acct": "a1"]],
                ["case": "invalid", "token": "not-a-token", "data": ["acct": "a1"]],
                ["case": "mismatch", "token": foreign, "data": ["acct": "a1"]],
                ["case": "quota", "token": quota, "data": ["acct": "a1"]],
                ["case": "quotaRetryAfter", "token": quotaRetry, "data": ["acct": "a1"]],
                ["case": "unavailable", "token": unavailable, "data": ["acct": "a1"]],
            ]))
        let events = await waitForMessages(stream, count: 1)

        let ok = try #require(results["ok"])
        #expect(ok["ok"] as? Bool == true)
        let name = try #require(ok["name"] as? String)
        #expect(name.hasPrefix("projects/\(Self.project)/messages/"))
        #expect(events.count == 1)
        #expect(events.first?["data"] as? [String: String] == ["acct": "a1", "st": "tag1"])
        #expect(events.first?["priority"] as? String == "high")
        #expect(events.first?["collapseKey"] as? String == "mail")
        #expect(events.first?["ttl"] as? Double == 3600)
        #expect(name.hasSuffix("/" + (events.first?["messageId"] as? String ?? "?")))

        #expect(results["unregistered"]?["error"] as? String == "UnregisteredError")
        #expect(results["invalid"]?["error"] as? String == "InvalidArgumentError")
        #expect(results["mismatch"]?["error"] as? String == "SenderIdMismatchError")
        #expect(results["quota"]?["error"] as? String == "QuotaExceededError")
        #expect(results["quotaRetryAfter"]?["error"] as? String == "QuotaExceededError")
        #expect(results["unavailable"]?["error"] as? String == "UnavailableError")

        // The capture log has every send with its raw body and outcome; the SDK retried 503 and 429+Retry-After.
        let sends = try await simulator.logEntries().filter { $0["kind"] as? String == "send" }
        func entries(_ token: String) -> [[String: Any]] { sends.filter { $0["token"] as? String == token } }
        let delivered = try #require(entries(live).first)
        #expect(delivered["outcome"] as? String == "delivered")
        #expect(sends.allSatisfy { $0["httpVersion"] as? String == "HTTP/1.1" })
        #expect(delivered["status"] as? Int == 200)
        let body = try #require(
            try JSONSerialization.jsonObject(with: Data((delivered["body"] as? String ?? "").utf8)) as? [String: Any])
        let android = (body["message"] as? [String: Any])?["android"] as? [String: Any]
        #expect(android?["collapse_key"] as? String == "mail")
        #expect(android?["ttl"] as? String == "3600s")
        #expect(entries(uninstalled).first?["errorCode"] as? String == "UNREGISTERED")
        #expect(entries(uninstalled).first?["status"] as? Int == 404)
        #expect(
            sends.contains {
                $0["token"] as? String == "not-a-token" && $0["errorCode"] as? String == "INVALID_ARGUMENT"
            })
        #expect(entries(foreign).first?["status"] as? Int == 403)
        #expect(entries(quota).count == 1)
        #expect(entries(quotaRetry).count == 5)
        #expect(entries(unavailable).count == 5)
        #expect(entries(unavailable).allSatisfy { $0["errorCode"] as? String == "UNAVAILABLE" })
    }

    /// firebase-admin's `send_each_async` sends over HTTP/2 (httpx), on the same port.
    @Test func firebaseAdminSendEachAsyncSpeaksHTTP2() async throws {
        let account = TestServiceAccount(project: Self.project)
        let simulator = try await RunningFCMSimulator.start(accounts: [account])
        let live = try await simulator.registerDevice(project: Self.project)
        let gone = try await simulator.registerDevice(project: Self.project)
        #expect(try await simulator.device("DELETE", "/sim/devices/\(gone)").0 == 204)
        let stream = try await simulator.openStream(live)
        defer { stream.stop(signal: SIGKILL) }
        var plan = simulator.plan(sends: [
            ["case": "ok", "token": live, "data": ["acct": "a3"]],
            ["case": "gone", "token": gone, "data": ["acct": "a3"]],
        ])
        plan["mode"] = "sendEachAsync"
        let results = try await simulator.runPeer("fcm_firebase_admin.py", plan: plan)
        let events = await waitForMessages(stream, count: 1)
        #expect(results["ok"]?["ok"] as? Bool == true)
        #expect(results["gone"]?["error"] as? String == "UnregisteredError")
        #expect(events.first?["data"] as? [String: String] == ["acct": "a3"])
        let sends = try await simulator.logEntries().filter { $0["kind"] as? String == "send" }
        #expect(sends.count == 2)
        #expect(sends.allSatisfy { $0["httpVersion"] as? String == "HTTP/2" })
    }

    @Test func firebaseAdminRefreshesAnExpiredAccessToken() async throws {
        let account = TestServiceAccount(project: Self.project)
        let simulator = try await RunningFCMSimulator.start(
            accounts: [account], environment: ["FCM_SIM_TOKEN_LIFETIME": "2"])
        let token = try await simulator.registerDevice(project: Self.project)
        let results = try await simulator.runPeer(
            "fcm_firebase_admin.py",
            plan: simulator.plan(sends: [
                ["case": "first", "token": token, "data": ["n": "1"]],
                ["case": "afterExpiry", "token": token, "data": ["n": "2"], "sleepBefore": 3],
            ]))
        #expect(results["first"]?["ok"] as? Bool == true)
        #expect(results["afterExpiry"]?["ok"] as? Bool == true)
        let log = try await simulator.logEntries()
        let grants = log.filter { $0["kind"] as? String == "token" && $0["outcome"] as? String == "granted" }
        #expect(grants.count >= 2)
        #expect(grants.allSatisfy { $0["clientEmail"] as? String == account.clientEmail })
        #expect(log.filter { $0["kind"] as? String == "send" && $0["status"] as? Int == 200 }.count == 2)
        let metrics = try await simulator.metrics()
        #expect(metrics.contains(#"fcm_sim_token_requests_total{client_email="\#(account.clientEmail)"}"#))
    }

    @Test func aServiceAccountWithTheWrongKeyGetsInvalidGrant() async throws {
        let trusted = TestServiceAccount(project: Self.project)
        let simulator = try await RunningFCMSimulator.start(accounts: [trusted])
        let token = try await simulator.registerDevice(project: Self.project)
        let impostor = TestServiceAccount(project: Self.project, keyIndex: 2)
        let impostorPath = simulator.directory.path("impostor.json")
        try impostor.write(to: impostorPath)
        var plan = simulator.plan(sends: [["case": "wrongKey", "token": token, "data": ["n": "1"]]])
        plan["serviceAccount"] = impostorPath
        let results = try await simulator.runPeer("fcm_firebase_admin.py", plan: plan)
        #expect(results["wrongKey"]?["error"] as? String == "RefreshError")
        #expect((results["wrongKey"]?["message"] as? String)?.contains("invalid_grant") == true)
        let log = try await simulator.logEntries()
        #expect(log.contains { $0["kind"] as? String == "token" && $0["errorCode"] as? String == "invalid_grant" })
        #expect(!log.contains { $0["kind"] as? String == "send" })
    }

    @Test func pyfcmSendsAndSeesErrors() async throws {
        let account = TestServiceAccount(project: Self.project)
        let simulator = try await RunningFCMSimulator.start(accounts: [account])
        let live = try await simulator.registerDevice(project: Self.project)
        let gone = try await simulator.registerDevice(project: Self.project)
        #expect(try await simulator.device("DELETE", "/sim/devices/\(gone)").0 == 204)
        let stream = try await simulator.openStream(live)
        defer { stream.stop(signal: SIGKILL) }
        let results = try await simulator.runPeer(
            "fcm_pyfcm.py",
            plan: simulator.plan(sends: [
                ["case": "ok", "token": live, "data": ["acct": "a2", "st": "t2"], "collapseKey": "k"],
                ["case": "gone", "token": gone, "data": ["acct": "a2"]],
            ]))
        let events = await waitForMessages(stream, count: 1)
        #expect(results["ok"]?["ok"] as? Bool == true)
        #expect((results["ok"]?["name"] as? String)?.hasPrefix("projects/\(Self.project)/messages/") == true)
        #expect(events.first?["data"] as? [String: String] == ["acct": "a2", "st": "t2"])
        #expect(events.first?["collapseKey"] as? String == "k")
        #expect(results["gone"]?["error"] as? String == "FCMNotRegisteredError")
        let log = try await simulator.logEntries()
        #expect(log.contains { $0["token"] as? String == gone && $0["errorCode"] as? String == "UNREGISTERED" })
    }

    /// One provider port, both protocols: curl over HTTP/2 (ALPN h2) and over HTTP/1.1 (ALPN http/1.1).
    @Test func theProviderPortSpeaksHTTP2AndHTTP1() async throws {
        let simulator = try await RunningFCMSimulator.start(accounts: [TestServiceAccount(project: Self.project)])
        for version in ["--http2", "--http1.1"] {
            let result = try await runTool(
                simulator.curl,
                [
                    "-sS", version, "--cacert", simulator.caPath, "-w", "\n%{http_code} %{http_version}",
                    "-d", "grant_type=password", "\(simulator.providerURL)/token",
                ])
            let lines = result.stdout.split(separator: "\n")
            #expect(lines.first?.contains("unsupported_grant_type") == true, "\(result.stdout) \(result.stderr)")
            #expect(lines.last == (version == "--http2" ? "400 2" : "400 1.1"), "\(result.stdout) \(result.stderr)")
        }
        // Many requests on one kept-alive HTTP/1.1 connection.
        let url = "\(simulator.providerURL)/v1/projects/\(Self.project)/messages:send"
        let batch = try await runTool(
            simulator.curl,
            ["-sS", "--http1.1", "--cacert", simulator.caPath, "-w", "%{http_code} %{num_connects}\n"]
                + (0..<20).flatMap { _ in ["-o", "/dev/null", "-d", "{}", url] })
        let codes = batch.stdout.split(separator: "\n")
        #expect(codes.count == 20, "\(batch.stderr)")
        #expect(codes.allSatisfy { $0.hasPrefix("401 ") })
        #expect(codes.dropFirst().allSatisfy { $0 == "401 0" }, "connections were not reused: \(codes)")
    }

    @Test func startupMistakesExitWithUsage() async throws {
        let executable = TestEnvironment.executable("fcm-sim").path
        let missingTLS = try await runTool(executable, ["--listen", "127.0.0.1:0"])
        let overOne = try await runTool(executable, ["--h2c", "--fault-drop", "0.5", "--fault-429", "0.6"])
        let negative = try await runTool(executable, ["--h2c", "--fault-latency-ms", "-5"])
        let unknown = try await runTool(executable, ["--h2c", "--nope", "1"])
        let help = try await runTool(executable, ["--help"])
        #expect(missingTLS.status == 2 && missingTLS.stderr.contains("--tls-cert"), "\(missingTLS.stderr)")
        #expect(overOne.status == 2 && overOne.stderr.contains("add up to at most 1"), "\(overOne.stderr)")
        #expect(negative.status == 2 && negative.stderr.contains("--fault-latency-ms"), "\(negative.stderr)")
        #expect(unknown.status == 2 && unknown.stderr.contains("--nope"))
        #expect(help.status == 0 && help.stdout.contains("--service-account"))
    }
}
