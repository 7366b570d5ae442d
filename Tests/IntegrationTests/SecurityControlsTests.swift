import Foundation
import HTTPClient
import TestSupport
import Testing

/// Security controls of the real binaries: TLS versions and ciphers on every TLS listener, answers no cache may
/// keep, a data folder only its owner can read, and a cap on an account's devices.
@Suite(.serialized) struct SecurityControlsTests {
    /// Whether `openssl s_client` completes a handshake with 127.0.0.1:`port` given `options`.
    static func handshakes(port: UInt16, _ options: [String]) throws -> Bool {
        let openssl = try #require(Subprocess.which("openssl"), "openssl is needed for the TLS checks")
        let result = try Subprocess.run(
            openssl, ["s_client", "-connect", "127.0.0.1:\(port)", "-servername", "localhost"] + options, input: "")
        // A completed handshake prints the negotiated cipher; a refused one "Cipher is (NONE)" or no session.
        return result.stdout.contains("New, TLSv1.") && !result.stdout.contains("Cipher is (NONE)")
    }

    @Test func onlyTLS12AndLaterWithAEADCiphersAreAccepted() async throws {
        let cluster = try await Cluster.start(accounts: [])
        for port in [cluster.apiPort, cluster.providerPort] {
            #expect(try !Self.handshakes(port: port, ["-tls1", "-cipher", "DEFAULT@SECLEVEL=0"]), "TLS 1.0 on \(port)")
            #expect(
                try !Self.handshakes(port: port, ["-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"]), "TLS 1.1 on \(port)")
            for cipher in ["ECDHE-ECDSA-AES256-SHA", "ECDHE-ECDSA-AES128-SHA256", "ECDHE-RSA-AES128-SHA"] {
                #expect(
                    try !Self.handshakes(port: port, ["-tls1_2", "-cipher", cipher + "@SECLEVEL=0"]),
                    "CBC cipher \(cipher) on \(port)")
            }
            #expect(try Self.handshakes(port: port, ["-tls1_2"]), "TLS 1.2 with an AEAD cipher on \(port)")
            #expect(try Self.handshakes(port: port, ["-tls1_3"]), "TLS 1.3 on \(port)")
        }
    }

    @Test func anOperatorCanRequireTLS13() async throws {
        let cluster = try await Cluster.start(accounts: [], mailboxdArguments: ["--tls-min-version", "1.3"])
        #expect(try !Self.handshakes(port: cluster.apiPort, ["-tls1_2"]))
        #expect(try Self.handshakes(port: cluster.apiPort, ["-tls1_3"]))
    }

    @Test func theSignInAnswerAndAuthenticatedAnswersAreNeverCached() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"])
        let signIn = try await cluster.call(
            .post, cluster.api + "/v1/session",
            json: ["username": "alice", "password": "password-alice", "deviceName": "test"])
        #expect(signIn.status == 201)
        #expect(signIn.headers["Cache-Control"] == "no-store")
        let token = try #require(signIn.body["accessToken"] as? String)
        let listing = try await cluster.call(.get, cluster.api + "/v1/messages", token: token)
        let state = try #require(listing.body["state"] as? String)
        for path in ["/v1/messages", "/v1/mailboxes", "/v1/changes?since=\(state)"] {
            let answer = try await cluster.call(.get, cluster.api + path, token: token)
            #expect(answer.headers["Cache-Control"] == "no-store", "\(path): \(answer.status)")
        }
    }

    @Test func theDataFolderIsTheServicesAlone() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"])
        let session = try await cluster.login("alice")
        _ = try await cluster.registerDevice(session: session)
        _ = try await cluster.deliver(to: "alice", subject: "modes", body: "x")
        let fm = FileManager.default
        let names = try #require(fm.enumerator(atPath: cluster.dataDir)?.allObjects as? [String])
        #expect(names.contains("mailbox.sqlite-wal") && names.contains("mailbox.sqlite-shm"))
        for name in [""] + names {
            let path = cluster.dataDir + (name.isEmpty ? "" : "/" + name)
            let attributes = try fm.attributesOfItem(atPath: path)
            let mode = try #require(attributes[.posixPermissions] as? Int)
            let isFolder = attributes[.type] as? FileAttributeType == .typeDirectory
            #expect(
                mode == (isFolder ? 0o700 : 0o600),
                "\(name.isEmpty ? "the data folder" : name): \(String(mode, radix: 8))")
        }
        #expect(!cluster.mailboxd.errorOutput.contains("open to other users"))
        // A folder loosened by hand is reported at the next start.
        try fm.setAttributes([.posixPermissions: 0o755], ofItemAtPath: cluster.dataDir)
        try await offPool { try cluster.crashAndRestartMailboxd() }
        #expect(cluster.mailboxd.errorOutput.contains("open to other users"))
    }

    @Test func theAccessLogHoldsNoTokenOrDeviceAddress() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"], mailboxdArguments: ["--access-log"])
        let session = try await cluster.login("alice")
        let token = try await cluster.registerDevice(session: session)
        #expect(try await cluster.call(.delete, cluster.api + "/v1/devices/\(token)", token: session).status == 204)
        #expect(try await cluster.call(.delete, cluster.api + "/v1/devices/\(token)", token: session).status == 404)
        // The access log line is written once the answer has gone out.
        #expect(await eventually { cluster.mailboxd.errorOutput.contains("DELETE /v1/devices/{id} 404") })
        let log = cluster.mailboxd.errorOutput
        #expect(log.contains("DELETE /v1/devices/{id} 204") && log.contains("DELETE /v1/devices/{id} 404"), "\(log)")
        #expect(log.contains("POST /v1/devices 201"))
        for secret in [token, session, cluster.deliveryToken] { #expect(!log.contains(secret)) }
    }

    @Test func anAccountHasAtMostItsCapOfDevices() async throws {
        let cluster = try await Cluster.start(
            accounts: ["alice", "bob"], mailboxdArguments: ["--max-devices-per-account", "2"])
        let session = try await cluster.login("alice")
        let first = try await cluster.registerDevice(session: session)
        _ = try await cluster.registerDevice(session: session)
        let created = try await cluster.call(
            .post, cluster.sim + "/sim/devices", json: ["topic": Cluster.topic, "environment": "sandbox"])
        let third = try #require(created.body["deviceToken"] as? String)
        let refused = try await cluster.call(
            .post, cluster.api + "/v1/devices", token: session,
            json: ["token": third, "topic": Cluster.topic, "environment": "sandbox"])
        #expect(refused.status == 409 && refused.body["error"] as? String == "tooManyDevices", "\(refused.body)")
        #expect(!String(decoding: refused.data, as: UTF8.self).contains(third))
        // Registering a device again is a refresh, not one more; another account has its own cap.
        let again = try await cluster.call(
            .post, cluster.api + "/v1/devices", token: session,
            json: ["token": first, "topic": Cluster.topic, "environment": "sandbox"])
        #expect(again.status == 201)
        let bob = try await cluster.login("bob")
        #expect(try await cluster.registerDevice(session: bob).count == 64)
        // Once one is removed there is room again.
        #expect(try await cluster.call(.delete, cluster.api + "/v1/devices/\(first)", token: session).status == 204)
        let now = try await cluster.call(
            .post, cluster.api + "/v1/devices", token: session,
            json: ["token": third, "topic": Cluster.topic, "environment": "sandbox"])
        #expect(now.status == 201)
    }

    /// A sign-in from `address` (a loopback address other than 127.0.0.1 is another client), by curl bound to it:
    /// the status and the body.
    static func signIn(
        _ cluster: Cluster, _ username: String, _ password: String, from address: String
    ) throws -> (status: Int, body: String) {
        let curl = try #require(Subprocess.which("curl"))
        let body = try JSONSerialization.data(withJSONObject: ["username": username, "password": password])
        let result = try Subprocess.run(
            curl,
            [
                "-s", "--interface", address, "--cacert", cluster.ca, "-H", "Content-Type: application/json",
                "--data-binary", "@-", "-w", "\n%{http_code}", cluster.api + "/v1/session",
            ], input: String(decoding: body, as: UTF8.self))
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
    }

    @Test func theOwnerSignsInFromElsewhereWhileAnotherAddressFloodsWrongPasswords() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"])
        let flooding = try await offPool {
            try (0..<7).map { _ in try Self.signIn(cluster, "alice", "wrong-password", from: "127.0.0.1").status }
        }
        #expect(flooding == [401, 401, 401, 401, 401, 429, 429], "that address is refused for alice")
        // The owner, from another address: the username is under attack, so the sign-in waits a back-off delay,
        // but it goes through.
        let owner = try await offPool { try Self.signIn(cluster, "alice", "password-alice", from: "127.0.0.2") }
        #expect(owner.status == 201 && owner.body.contains("accessToken"), "\(owner)")
        // An address guessing across usernames is refused for every username after 20 failures, the right
        // password included; another address is not.
        let spraying = try await offPool {
            try (0..<15).map { n in try Self.signIn(cluster, "user\(n)", "wrong-password", from: "127.0.0.1").status }
        }
        #expect(spraying.allSatisfy { $0 == 401 }, "\(spraying)")
        let refused = try await offPool { try Self.signIn(cluster, "alice", "password-alice", from: "127.0.0.1") }
        #expect(refused.status == 429 && refused.body.contains("tooManyAttempts"))
        let elsewhere = try await offPool { try Self.signIn(cluster, "alice", "password-alice", from: "127.0.0.3") }
        #expect(elsewhere.status == 201)
        let metrics = String(decoding: try await cluster.call(.get, cluster.metrics).data, as: UTF8.self)
        #expect(metrics.contains(#"mailboxd_login_throttled_total{outcome="delayed"} 1"#), "\(metrics)")
        #expect(metrics.contains(#"mailboxd_login_throttled_total{outcome="refused"} 3"#))
    }

    @Test func sessionsEndWhenIdleAndAtTheirLifetime() async throws {
        let cluster = try await Cluster.start(
            accounts: ["alice"], mailboxdArguments: ["--session-idle-timeout", "2s", "--session-lifetime", "4s"])
        let used = try await cluster.login("alice")
        let idle = try await cluster.login("alice")
        // Time passing is what this test is about: the one session is used every second while the other stays
        // unused for longer than the idle timeout (a check of it would count as a use).
        for _ in 0..<3 {
            try await Task.sleep(for: .seconds(1))
            #expect(try await cluster.call(.get, cluster.api + "/v1/mailboxes", token: used).status == 200)
        }
        let expired = try await cluster.call(.get, cluster.api + "/v1/mailboxes", token: idle)
        #expect(expired.status == 401 && expired.body["error"] as? String == "unauthorized", "\(expired.body)")
        // Used all along (never idle), it still ends once it is older than its lifetime.
        #expect(
            try await eventually {
                try await cluster.call(.get, cluster.api + "/v1/mailboxes", token: used).status == 401
            },
            "used all along, but older than its lifetime")
    }

    @Test func theSessionCapEndsTheLeastRecentlyUsedAndSigningOutEverywhereEndsAll() async throws {
        let cluster = try await Cluster.start(
            accounts: ["alice", "bob"], mailboxdArguments: ["--max-sessions-per-account", "2"])
        let first = try await cluster.login("alice")
        let second = try await cluster.login("alice")
        let third = try await cluster.login("alice")
        #expect(try await cluster.call(.get, cluster.api + "/v1/mailboxes", token: first).status == 401)
        #expect(try await cluster.call(.get, cluster.api + "/v1/mailboxes", token: second).status == 200)
        let bob = try await cluster.login("bob")
        let device = try await cluster.registerDevice(session: third)
        let everywhere = try await cluster.call(.delete, cluster.api + "/v1/sessions", token: second)
        #expect(everywhere.status == 204)
        for token in [second, third] {
            #expect(try await cluster.call(.get, cluster.api + "/v1/mailboxes", token: token).status == 401)
        }
        #expect(try await cluster.call(.get, cluster.api + "/v1/mailboxes", token: bob).status == 200)
        // The device is gone with the sessions: a new sign-in cannot remove it, it is not there.
        let again = try await cluster.login("alice")
        #expect(try await cluster.call(.delete, cluster.api + "/v1/devices/\(device)", token: again).status == 404)
    }

    @Test func deviceRegistrationsAreRateLimitedPerAccount() async throws {
        let cluster = try await Cluster.start(
            accounts: ["alice", "bob"], mailboxdArguments: ["--device-registrations-per-hour", "3"])
        let session = try await cluster.login("alice")
        let token = try await cluster.registerDevice(session: session)
        for _ in 0..<2 {
            let refresh = try await cluster.call(
                .post, cluster.api + "/v1/devices", token: session,
                json: ["token": token, "topic": Cluster.topic, "environment": "sandbox"])
            #expect(refresh.status == 201)
        }
        let limited = try await cluster.call(
            .post, cluster.api + "/v1/devices", token: session,
            json: ["token": token, "topic": Cluster.topic, "environment": "sandbox"])
        #expect(limited.status == 429 && limited.body["error"] as? String == "tooManyRegistrations", "\(limited.body)")
        let wait = try #require(limited.headers["Retry-After"].flatMap { Int($0) })
        #expect((3500...3600).contains(wait))
        #expect(!String(decoding: limited.data, as: UTF8.self).contains(token))
        let bob = try await cluster.login("bob")
        #expect(try await cluster.registerDevice(session: bob).count == 64, "another account has its own limit")
    }

    @Test func aTokenAnotherAccountRegistersLeavesTheFirstAccountsRegistrationWorking() async throws {
        let cluster = try await Cluster.start(accounts: ["alice", "mallory"])
        let alice = try await cluster.login("alice")
        let token = try await cluster.registerDevice(session: alice)
        let stream = try await cluster.notifications(token)
        let launch = await stream.waitFor(count: 1)
        #expect(launch.count == 1, "the registration's own signal")
        // Mallory learned the token and registers it for herself.
        let mallory = try await cluster.login("mallory")
        let taken = try await cluster.call(
            .post, cluster.api + "/v1/devices", token: mallory,
            json: ["token": token, "topic": Cluster.topic, "environment": "sandbox"])
        #expect(taken.status == 201)
        _ = await stream.waitFor(count: 2)
        // Mail for alice still reaches her device, under her registration's alias.
        let delivery = try await cluster.deliver(to: "alice", subject: "still mine", body: "x")
        let state = try #require(delivery["state"] as? String)
        let tag = try #require(cluster.tag(of: state, device: token))
        #expect(
            await stream.waitForPayload(containing: tag),
            "alice's device was signalled for her change: \(stream.payloads)")
        // Mallory removing "her" device leaves alice's.
        let removed = try await cluster.call(.delete, cluster.api + "/v1/devices/\(token)", token: mallory)
        #expect(removed.status == 204)
        #expect(try await cluster.call(.delete, cluster.api + "/v1/devices/\(token)", token: alice).status == 204)
    }

    @Test func metricsAreOnTheirOwnListenerOnly() async throws {
        let cluster = try await Cluster.start(accounts: [])
        #expect(try await cluster.call(.get, cluster.api + "/metrics").status == 404)
        let page = try await cluster.call(.get, cluster.metrics)
        #expect(page.status == 200 && String(decoding: page.data, as: UTF8.self).contains("mailboxd_outbox_depth"))
        #expect(try await cluster.call(.get, cluster.api + "/healthz").status == 200)
    }
}
