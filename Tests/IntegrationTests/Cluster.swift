import Foundation
import HTTPClient
import Locking
import OpenSSLCrypto
import TestSupport
import Testing

/// The real binaries on loopback: `mailboxd dev-setup`, accounts, `apns-sim` (a production and a sandbox
/// provider listener) and `mailboxd serve`, signalling each device through its environment's listener.
final class Cluster: Sendable {
    static let topic = "com.example.signalfetch"
    let directory: TemporaryDirectory
    let apnsSim: ChildProcess
    /// fcm-sim, when the cluster has Android devices (`fcm: true`).
    let fcmSim: ChildProcess?
    /// fcm-sim's provider and device ports.
    let fcmPorts: (provider: UInt16, device: UInt16)?
    /// webpush-sim, when the cluster has browsers (`webpush: true`); without it mailboxd has no VAPID key and
    /// sends no Web Push.
    let webPushSim: ChildProcess?
    /// webpush-sim's push-resource, device and Mozilla-protocol ports.
    let webPushPorts: (provider: UInt16, device: UInt16, mozilla: UInt16)?
    private let mailboxdProcess: ProcessBox
    private let mailboxdCommand: [String]
    var mailboxd: ChildProcess { mailboxdProcess.current }
    let apiPort: UInt16
    /// mailboxd's LMTP port, when `mailboxdArguments` ask for an LMTP listener (`--lmtp-listen 127.0.0.1:0`).
    let lmtpPort: UInt16?
    /// mailboxd's IMAP port, when `mailboxdArguments` ask for an IMAP listener (`--imap-listen 127.0.0.1:0`).
    let imapPort: UInt16?
    /// mailboxd's JMAP WebSocket port, when `mailboxdArguments` ask for one (`--jmap-ws-listen 127.0.0.1:0`).
    let jmapWebSocketPort: UInt16?
    /// The port mailboxd serves `/metrics` on (its own listener, plain HTTP on loopback).
    let metricsPort: UInt16
    let providerPort: UInt16
    let sandboxPort: UInt16
    let devicePort: UInt16
    let client: HTTPClient
    let deliveryToken: String
    /// Each registered device's signal key, by device token.
    private let signalKeys = LockedValue<[String: String]>([:])

    var dataDir: String { directory.path("data") }
    var ca: String { directory.path("data/tls/ca.pem") }
    var api: String { "https://127.0.0.1:\(apiPort)" }
    var metrics: String { "http://127.0.0.1:\(metricsPort)/metrics" }
    var sim: String { "http://127.0.0.1:\(devicePort)" }
    /// fcm-sim's device side.
    var fcm: String { "http://127.0.0.1:\(fcmPorts?.device ?? 0)" }
    /// webpush-sim's device side.
    var webPush: String { "http://127.0.0.1:\(webPushPorts?.device ?? 0)" }
    /// webpush-sim's Mozilla push protocol listener (Firefox's `dom.push.serverURL`).
    var mozillaPush: String { "ws://127.0.0.1:\(webPushPorts?.mozilla ?? 0)/" }
    /// The Android app FCM devices register for.
    static let androidApp = "com.example.signalfetch"

    /// `apnsConfig(data, productionURL, sandboxURL)` writes an `--apns-config` file's JSON for mailboxd instead
    /// of the single-app flags; the simulator then allows every topic.
    init(
        accounts: [String] = ["alice", "bob"], mailboxdArguments: [String] = [], simArguments: [String] = [],
        apnsConfig: (@Sendable (String, String, String) -> String)? = nil, fcm: Bool = false,
        fcmSimArguments: [String] = [], webpush: Bool = false, webPushSimArguments: [String] = []
    )
        throws
    {
        directory = try TemporaryDirectory(prefix: "cluster")
        let data = directory.path("data")
        let mailboxdPath = TestEnvironment.executable("mailboxd").path
        let logs = directory.url.path
        func runTool(_ arguments: [String], stdin: String? = nil) throws {
            let tool = try ChildProcess(mailboxdPath, arguments, stdin: stdin, logDirectory: logs)
            let status = tool.waitForExit()
            try #require(status == 0, "mailboxd \(arguments[0]) failed: \(tool.errorOutput)")
        }
        try runTool(["dev-setup", "--data-dir", data])
        for name in accounts {
            try runTool(["account", "add", name, "--data-dir", data], stdin: "password-\(name)\n")
        }
        let keyID = try String(contentsOfFile: data + "/apns/key-id", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let teamID = try String(contentsOfFile: data + "/apns/team-id", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        deliveryToken = try String(contentsOfFile: data + "/delivery-token", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        apnsSim = try ChildProcess(
            TestEnvironment.executable("apns-sim").path,
            [
                "--listen", "127.0.0.1:0", "--sandbox-listen", "127.0.0.1:0", "--device-listen", "127.0.0.1:0",
                "--tls-cert", data + "/tls/server.pem", "--tls-key", data + "/tls/server.key", "--provider-key",
                "\(keyID):\(teamID):\(data)/apns/key.pub.pem",
            ] + (apnsConfig == nil ? ["--topic", Self.topic] : []) + simArguments, logDirectory: directory.url.path)
        let apnsPorts = try apnsSim.listeningPorts(prefix: "apns-sim listening ")
        (providerPort, sandboxPort, devicePort) = (
            try #require(apnsPorts["provider"]), try #require(apnsPorts["sandbox"]), try #require(apnsPorts["device"])
        )
        let production = "https://127.0.0.1:\(providerPort)"
        let sandbox = "https://127.0.0.1:\(sandboxPort)"
        var apnsFlags = [
            "--apns-url", production, "--apns-sandbox-url", sandbox, "--apns-ca", data + "/tls/ca.pem",
            "--apns-topic", Self.topic,
        ]
        if let apnsConfig {
            let file = directory.path("apns-config.json")
            try apnsConfig(data, production, sandbox).write(toFile: file, atomically: true, encoding: .utf8)
            apnsFlags = ["--apns-config", file]
        }
        if fcm {
            // fcm-sim trusts the service account dev-setup wrote; mailboxd's --fcm-config points at fcm-sim.
            let sim = try ChildProcess(
                TestEnvironment.executable("fcm-sim").path,
                [
                    "--listen", "127.0.0.1:0", "--device-listen", "127.0.0.1:0", "--tls-cert", data + "/tls/server.pem",
                    "--tls-key", data + "/tls/server.key", "--service-account", data + "/fcm/service-account.json",
                ] + fcmSimArguments, logDirectory: directory.url.path)
            let listening = try sim.listeningPorts(prefix: "fcm-sim listening ")
            let ports = (provider: try #require(listening["provider"]), device: try #require(listening["device"]))
            (fcmSim, fcmPorts) = (sim, ports)
            let file = directory.path("fcm-config.json")
            let config: [String: Any] = [
                "endpoint": "https://127.0.0.1:\(ports.provider)",
                "tokenURI": "https://127.0.0.1:\(ports.provider)/token",
                "ca": data + "/tls/ca.pem",
                "apps": [["app": Self.androidApp, "serviceAccountFile": data + "/fcm/service-account.json"]],
            ]
            try JSONSerialization.data(withJSONObject: config).write(to: URL(fileURLWithPath: file))
            apnsFlags += ["--fcm-config", file]
        } else {
            fcmSim = nil
            fcmPorts = nil
        }
        if webpush {
            // webpush-sim serves TLS with dev-setup's certificate; mailboxd trusts its CA and allows its loopback
            // endpoint host (the only way an endpoint on loopback is accepted).
            let sim = try ChildProcess(
                TestEnvironment.executable("webpush-sim").path,
                [
                    "--listen", "127.0.0.1:0", "--device-listen", "127.0.0.1:0", "--mozilla-listen", "127.0.0.1:0",
                    "--tls-cert", data + "/tls/server.pem", "--tls-key", data + "/tls/server.key",
                ] + webPushSimArguments, logDirectory: directory.url.path)
            let listening = try sim.listeningPorts(prefix: "webpush-sim listening ")
            let ports = (
                provider: try #require(listening["provider"]), device: try #require(listening["device"]),
                mozilla: try #require(listening["mozilla"])
            )
            (webPushSim, webPushPorts) = (sim, ports)
            apnsFlags += [
                "--webpush-ca", data + "/tls/ca.pem", "--webpush-allow-host", "127.0.0.1:\(ports.provider)",
                "--webpush-subject", "mailto:ops@example.com",
            ]
        } else {
            webPushSim = nil
            webPushPorts = nil
            try FileManager.default.removeItem(atPath: data + "/webpush/vapid.pem")
        }
        // A fixed instance name: `crashAndRestartMailboxd` starts the same instance again, which ends the outbox
        // leases its killed predecessor held (a process under another name would wait for them to run out).
        let command =
            [mailboxdPath]
            + ["serve", "--data-dir", data, "--listen", "127.0.0.1:0", "--instance-id", "cluster-mailboxd"]
            + ["--metrics-listen", "127.0.0.1:0"] + apnsFlags + mailboxdArguments
        let mailboxd = try ChildProcess(command[0], Array(command.dropFirst()), logDirectory: directory.url.path)
        mailboxdProcess = ProcessBox(mailboxd)
        apiPort = try #require(mailboxd.listeningPorts(prefix: "mailboxd listening on ")["url"])
        metricsPort = try #require(mailboxd.listeningPorts(prefix: "mailboxd: metrics on ")["url"])
        lmtpPort =
            mailboxdArguments.contains("--lmtp-listen")
            ? try mailboxd.listeningPorts(prefix: "mailboxd: LMTP on ")["address"] : nil
        imapPort =
            mailboxdArguments.contains("--imap-listen")
            ? try mailboxd.listeningPorts(prefix: "mailboxd: IMAP on ")["url"] : nil
        jmapWebSocketPort =
            mailboxdArguments.contains("--jmap-ws-listen")
            ? try mailboxd.listeningPorts(prefix: "mailboxd: JMAP WebSocket on ")["url"] : nil
        // A restart binds the same ports again.
        mailboxdCommand = Self.replacing(
            ["--listen": "127.0.0.1:\(apiPort)", "--metrics-listen": "127.0.0.1:\(metricsPort)"]
                .merging(lmtpPort.map { ["--lmtp-listen": "127.0.0.1:\($0)"] } ?? [:]) { $1 }
                .merging(imapPort.map { ["--imap-listen": "127.0.0.1:\($0)"] } ?? [:]) { $1 }
                .merging(jmapWebSocketPort.map { ["--jmap-ws-listen": "127.0.0.1:\($0)"] } ?? [:]) { $1 }, in: command)
        client = HTTPClient(configuration: .init(httpVersion: .http1, tls: .init(caFile: data + "/tls/ca.pem")))
    }

    /// `command` with each flag in `values` given its new value.
    static func replacing(_ values: [String: String], in command: [String]) -> [String] {
        var command = command
        for (flag, value) in values {
            if let index = command.firstIndex(of: flag) { command[index + 1] = value }
        }
        return command
    }

    /// Starts a cluster off the cooperative thread pool (starting processes and waiting for ports blocks).
    static func start(
        accounts: [String] = ["alice", "bob"], mailboxdArguments: [String] = [], simArguments: [String] = [],
        apnsConfig: (@Sendable (String, String, String) -> String)? = nil, fcm: Bool = false,
        fcmSimArguments: [String] = [], webpush: Bool = false, webPushSimArguments: [String] = []
    ) async throws -> Cluster {
        try await offPool {
            try Cluster(
                accounts: accounts, mailboxdArguments: mailboxdArguments, simArguments: simArguments,
                apnsConfig: apnsConfig, fcm: fcm, fcmSimArguments: fcmSimArguments, webpush: webpush,
                webPushSimArguments: webPushSimArguments)
        }
    }

    /// Another mailboxd with the same command on `port` (0 picks one, read back), for a store several instances
    /// share; the caller stops it.
    func startAnotherMailboxd(port: UInt16 = 0, instanceID: String) throws -> (process: ChildProcess, port: UInt16) {
        let command = Self.replacing(
            [
                "--listen": "127.0.0.1:\(port)", "--instance-id": instanceID, "--metrics-listen": "127.0.0.1:0",
                "--lmtp-listen": "127.0.0.1:0", "--imap-listen": "127.0.0.1:0", "--jmap-ws-listen": "127.0.0.1:0",
            ], in: mailboxdCommand)
        let process = try ChildProcess(command[0], Array(command.dropFirst()), logDirectory: directory.url.path)
        let bound = try #require(
            try process.listeningPorts(prefix: "mailboxd listening on ")["url"],
            "the second mailboxd did not start: \(process.errorOutput)")
        return (process, bound)
    }

    /// Adds the account `name` (password `password-NAME`) to the store at `database` with `mailboxd account add`,
    /// off the cooperative thread pool: for a store the cluster's mailboxd shares with others.
    func addAccount(_ name: String, database: String) async throws {
        let (dataDir, logs) = (dataDir, directory.url.path)
        _ = try await offPool {
            let tool = try ChildProcess(
                TestEnvironment.executable("mailboxd").path,
                ["account", "add", name, "--data-dir", dataDir, "--database", database],
                stdin: "password-\(name)\n", logDirectory: logs)
            try #require(tool.waitForExit() == 0, "account add failed: \(tool.errorOutput)")
        }
    }

    /// SIGKILLs mailboxd and starts it again on the same data and port.
    func crashAndRestartMailboxd() throws {
        mailboxd.stop(signal: SIGKILL)
        mailboxdProcess.current = try ChildProcess(
            mailboxdCommand[0], Array(mailboxdCommand.dropFirst()), logDirectory: directory.url.path)
        try #require(waitForPort(apiPort), "mailboxd did not restart: \(mailboxd.errorOutput)")
    }

    deinit {
        client.shutdown()
        mailboxd.stop()
        apnsSim.stop()
        fcmSim?.stop()
        webPushSim?.stop()
    }

    /// Sends a request and returns the status and the JSON body (if any).
    func call(
        _ method: HTTPMethod, _ url: String, token: String? = nil, json: Any? = nil, raw: Data? = nil,
        extraHeaders: [(String, String)] = []
    ) async throws -> (status: Int, body: [String: Any], data: Data, headers: HTTPHeaders) {
        var headers: HTTPHeaders = ["Content-Type": "application/json"]
        for (name, value) in extraHeaders { headers.add(name: name, value: value) }
        if let token { headers.add(name: "Authorization", value: "Bearer \(token)") }
        let body = try raw ?? json.map { try JSONSerialization.data(withJSONObject: $0) }
        let response = try await client.execute(
            HTTPClient.Request(method: method, url: url, headers: headers, body: body))
        let object = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any] ?? [:]
        return (response.status, object, response.body, response.headers)
    }

    func login(_ name: String) async throws -> String {
        let result = try await call(
            .post, api + "/v1/session", json: ["username": name, "password": "password-\(name)", "deviceName": "test"])
        try #require(result.status == 201, "login failed: \(result.status)")
        return try #require(result.body["accessToken"] as? String)
    }

    /// Registers a device at the simulator (its token belongs to `simEnvironment`, by default `environment`) and
    /// at mailboxd as `environment`; returns its token.
    func registerDevice(
        session: String, topic: String = topic, environment: String = "sandbox", simEnvironment: String? = nil
    ) async throws -> String {
        let created = try await call(
            .post, sim + "/sim/devices", json: ["topic": topic, "environment": simEnvironment ?? environment])
        try #require(created.status == 201)
        let token = try #require(created.body["deviceToken"] as? String)
        let registered = try await call(
            .post, api + "/v1/devices", token: session,
            json: ["token": token, "topic": topic, "environment": environment])
        try #require(registered.status == 201, "device registration failed: \(registered.status)")
        let key = try #require(registered.body["signalKey"] as? String, "no signalKey in the registration")
        signalKeys.withLock { $0[token] = key }
        return token
    }

    /// The `st` a signal to the device `token` carries for `state`: the contract's tag, the first 16 characters
    /// of base64url(HMAC-SHA256(the registration's signalKey, state)), computed here from the contract.
    func tag(of state: String, device token: String) -> String? {
        guard let key = signalKeys.withLock({ $0[token] }).flatMap({ Base64URL.decode($0) }) else { return nil }
        return String(Base64URL.encode(HMACSHA256.authenticationCode(for: Array(state.utf8), key: key)).prefix(16))
    }

    func deliver(
        to: String, from: String = "sender@example.com", subject: String, body: String
    ) async throws
        -> [String: Any]
    {
        let result = try await call(
            .post, api + "/v1/deliveries", token: deliveryToken,
            json: ["to": to, "from": from, "subject": subject, "body": body])
        try #require(result.status == 201, "delivery failed: \(result.status)")
        return result.body
    }

    /// Opens the simulator's notification stream for `token`.
    func notifications(_ token: String) async throws -> NotificationStream {
        let response = try await client.stream(HTTPClient.Request(url: sim + "/sim/devices/\(token)/notifications"))
        try #require(response.status == 200)
        return NotificationStream(response: response)
    }

    /// An Android device: registered at fcm-sim, then with mailboxd (`service` `fcm`); returns its FCM token and
    /// its id on mailboxd.
    func registerAndroidDevice(session: String) async throws -> (token: String, id: String) {
        let created = try await call(
            .post, fcm + "/sim/devices", json: ["app": Self.androidApp, "project": "signalfetch-dev"])
        try #require(created.status == 201, "fcm-sim registration failed: \(created.status)")
        let token = try #require(created.body["token"] as? String)
        let registered = try await call(
            .post, api + "/v1/devices", token: session,
            json: ["service": "fcm", "token": token, "app": Self.androidApp])
        try #require(registered.status == 201, "device registration failed: \(registered.status) \(registered.body)")
        #expect(registered.body["token"] as? String == token, "the FCM token keeps its case")
        let key = try #require(registered.body["signalKey"] as? String)
        signalKeys.withLock { $0[token] = key }
        return (token, try #require(registered.body["id"] as? String))
    }

    /// A browser: a subscription at webpush-sim for mailboxd's VAPID key (the simulator plays the browser and
    /// holds its keys), registered with mailboxd as the browser's `toJSON()`; returns the simulator's id for it
    /// (under which its signal key is kept), its id on mailboxd and its endpoint.
    func registerBrowser(session: String) async throws -> (id: String, deviceID: String, endpoint: String) {
        let vapid = try await call(.get, api + "/v1/webpush/vapid-public-key")
        let key = try #require(vapid.body["publicKey"] as? String, "no VAPID key: \(vapid.status)")
        let created = try await call(.post, webPush + "/sim/subscriptions", json: ["applicationServerKey": key])
        try #require(created.status == 201, "webpush-sim subscription failed: \(created.status) \(created.body)")
        let id = try #require(created.body["id"] as? String)
        let subscription = try #require(created.body["subscription"] as? [String: Any])
        let registered = try await call(
            .post, api + "/v1/devices", token: session, json: ["service": "webpush", "subscription": subscription])
        try #require(registered.status == 201, "device registration failed: \(registered.status) \(registered.body)")
        let signalKey = try #require(registered.body["signalKey"] as? String)
        signalKeys.withLock { $0[id] = signalKey }
        return (
            id, try #require(registered.body["id"] as? String), try #require(subscription["endpoint"] as? String)
        )
    }

    /// `token` as a path segment (FCM tokens hold `:`).
    static func segment(_ token: String) -> String {
        token.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(.init(charactersIn: "-_"))) ?? token
    }

    /// Opens fcm-sim's message stream for `token`: each event's `data` (the signal's fields).
    func messages(_ token: String) async throws -> NotificationStream {
        let response = try await client.stream(
            HTTPClient.Request(url: fcm + "/sim/devices/\(Self.segment(token))/messages"))
        try #require(response.status == 200)
        return NotificationStream(response: response, field: "data")
    }
}

/// The payloads a simulated device receives, in order, read by a background task into a buffer.
final class NotificationStream: Sendable {
    private let response: HTTPClient.StreamingResponse
    private let received = PayloadBuffer()
    private let reader: Task<Void, Never>

    init(response: HTTPClient.StreamingResponse, field: String = "payload") {
        self.response = response
        let received = self.received
        reader = Task { [response] in
            do {
                for try await event in response.body.serverSentEvents {
                    guard let object = try? JSONSerialization.jsonObject(with: Data(event.data.utf8)) as? [String: Any],
                        let payload = object[field] as? [String: Any]
                    else { continue }
                    let text = String(decoding: try JSONSerialization.data(withJSONObject: payload), as: UTF8.self)
                    received.append(text)
                }
            } catch {}
        }
    }

    /// Every payload received so far, as JSON text.
    var payloads: [String] { received.all }

    /// The payloads received so far, parsed.
    var parsed: [[String: Any]] {
        payloads.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// The `st` (state tag) of the newest payload.
    var lastTag: String? { parsed.last?["st"] as? String }

    /// Waits until at least `count` payloads arrived and returns them parsed. `timeout` (seconds) only guards
    /// against a signal that never comes.
    func waitFor(count: Int, timeout: Double = Double(eventTimeout.components.seconds)) async -> [[String: Any]] {
        _ = await eventually(timeout: .seconds(timeout)) { payloads.count >= count }
        return parsed
    }

    /// Waits until a payload containing `text` arrived; returns whether one did. `timeout` (seconds) only guards
    /// against a signal that never comes.
    func waitForPayload(
        containing text: String, timeout: Double = Double(eventTimeout.components.seconds)
    ) async -> Bool {
        await eventually(timeout: .seconds(timeout)) { payloads.contains { $0.contains(text) } }
    }

    /// Waits until the newest payload carries the state tag `tag` (the device has converged on that state); returns
    /// whether it did.
    func waitForLastTag(_ tag: String) async -> Bool {
        await eventually { lastTag == tag }
    }

    deinit {
        reader.cancel()
        response.cancel()
    }
}

/// Received payload texts, guarded by a mutex.
final class PayloadBuffer: Sendable {
    private let texts = LockedValue<[String]>([])
    func append(_ text: String) { texts.withLock { $0.append(text) } }
    var all: [String] { texts.withLock { $0 } }
}

/// The current process of a service that a test may restart.
final class ProcessBox: Sendable {
    private let process: LockedValue<ChildProcess>
    init(_ process: ChildProcess) { self.process = LockedValue(process) }
    var current: ChildProcess {
        get { process.withLock { $0 } }
        set { process.withLock { $0 = newValue } }
    }
}
