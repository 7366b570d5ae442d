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
        var log = ""
        for _ in 0..<100 where !log.contains("DELETE /v1/devices/{id} 404") {
            try await Task.sleep(for: .milliseconds(20))
            log = cluster.mailboxd.errorOutput
        }
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
}
