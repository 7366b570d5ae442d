import FCMSimulator
import Foundation
import OpenSSLCrypto
import TestSupport
import Testing

/// A Google service-account JSON for `project`, with a fresh RSA key.
struct TestServiceAccount {
    /// Keys are slow to make: a few are made once and reused across accounts.
    static let keys: [RSAPrivateKey] = (0..<3).map { _ in try! RSAPrivateKey() }

    let project: String
    let clientEmail: String
    let keyID: String
    let key: RSAPrivateKey

    init(project: String, keyIndex: Int = 0, keyID: String = "0123456789abcdef") {
        self.project = project
        clientEmail = "fcm-sender@\(project).iam.gserviceaccount.com"
        self.keyID = keyID
        key = Self.keys[keyIndex]
    }

    func json(tokenURI: String = "https://oauth2.googleapis.com/token") throws -> Data {
        let object: [String: Any] = [
            "type": "service_account", "project_id": project, "private_key_id": keyID,
            "private_key": key.pemRepresentation, "client_email": clientEmail, "client_id": "1234567890",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": tokenURI,
        ]
        return try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    }

    func write(to path: String) throws {
        try json().write(to: URL(fileURLWithPath: path))
    }

    var account: FCMServiceAccount {
        FCMServiceAccount(
            projectID: project, clientEmail: clientEmail, privateKeyID: keyID,
            tokenURI: "https://oauth2.googleapis.com/token", publicKey: key.publicKey)
    }

    /// A JWT-bearer assertion as google-auth makes it.
    func assertion(
        issuedAt: Date = Date(), lifetime: Int64 = 3600,
        scope: String = "https://www.googleapis.com/auth/cloud-platform",
        audience: String = "https://oauth2.googleapis.com/token", signingKey: RSAPrivateKey? = nil
    ) throws -> String {
        let iat = Int64(issuedAt.timeIntervalSince1970)
        return try JWT.makeRS256(
            keyID: keyID,
            claims: [
                "iss": .string(clientEmail), "scope": .string(scope), "aud": .string(audience), "iat": .integer(iat),
                "exp": .integer(iat + lifetime),
            ], key: signingKey ?? key)
    }
}

/// A running `fcm-sim` process with its TLS material and service accounts.
final class RunningFCMSimulator: Sendable {
    let directory: TemporaryDirectory
    let process: ChildProcess
    let providerPort: Int
    let devicePort: Int
    let curl: String
    let caPath: String
    /// The trusted accounts' JSON files, in the order given.
    let accountPaths: [String]

    init(accounts: [TestServiceAccount], extraArguments: [String] = [], environment: [String: String] = [:]) throws {
        curl = try requireTool("curl")
        let executable = TestEnvironment.executable("fcm-sim").path
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            Issue.record("fcm-sim is not built at \(executable); run swift build first")
            throw HarnessError("fcm-sim missing")
        }
        directory = try TemporaryDirectory(prefix: "fcm-sim-bin")
        let authority = try DevCertificates.makeCertificateAuthority(commonName: "fcm-sim test CA")
        let server = try DevCertificates.makeServerCertificate(hosts: ["localhost", "127.0.0.1"], signedBy: authority)
        caPath = directory.path("ca.pem")
        try authority.certificatePEM.write(toFile: caPath, atomically: true, encoding: .utf8)
        try server.certificatePEM.write(toFile: directory.path("server.pem"), atomically: true, encoding: .utf8)
        try server.privateKeyPEM.write(toFile: directory.path("server.key"), atomically: true, encoding: .utf8)
        var paths: [String] = []
        var arguments = ["--listen", "127.0.0.1:0", "--device-listen", "127.0.0.1:0"]
        for (index, account) in accounts.enumerated() {
            let path = directory.path("account-\(index).json")
            try account.write(to: path)
            paths.append(path)
            arguments += ["--service-account", path]
        }
        accountPaths = paths
        var fullEnvironment = environment
        fullEnvironment["FCM_SIM_TLS_CERT"] = directory.path("server.pem")
        fullEnvironment["FCM_SIM_TLS_KEY"] = directory.path("server.key")
        process = try ChildProcess(
            executable, arguments + extraArguments, environment: fullEnvironment, logDirectory: directory.url.path)
        let ports = try process.listeningPorts(prefix: "fcm-sim listening ")
        guard let provider = ports["provider"], let device = ports["device"]
        else { throw HarnessError("fcm-sim did not name its ports: \(process.errorOutput)") }
        (providerPort, devicePort) = (Int(provider), Int(device))
    }

    static func start(
        accounts: [TestServiceAccount], extraArguments: [String] = [], environment: [String: String] = [:]
    ) async throws -> RunningFCMSimulator {
        try await offPool {
            try RunningFCMSimulator(accounts: accounts, extraArguments: extraArguments, environment: environment)
        }
    }

    var deviceURL: String { "http://127.0.0.1:\(devicePort)" }
    var providerURL: String { "https://127.0.0.1:\(providerPort)" }

    /// A device-API call with curl: the status and the JSON body.
    func device(_ method: String, _ path: String, _ body: String? = nil) async throws -> (Int, Any?) {
        var arguments = ["-s", "-X", method, "-w", "\n%{http_code}", "\(deviceURL)\(path)"]
        if let body { arguments += ["--data-binary", body] }
        let result = try await runTool(curl, arguments)
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        let status = Int(lines.last ?? "") ?? 0
        let text = lines.dropLast().joined(separator: "\n")
        return (status, try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed]))
    }

    func registerDevice(project: String, app: String = "com.example.mail") async throws -> String {
        let (status, body) = try await device("POST", "/sim/devices", #"{"app":"\#(app)","project":"\#(project)"}"#)
        guard status == 201, let token = (body as? [String: Any])?["token"] as? String else {
            throw HarnessError("registration failed: \(status)")
        }
        return token
    }

    func openStream(_ token: String) async throws -> ChildProcess {
        let child = try ChildProcess(
            curl, ["-sN", "\(deviceURL)/sim/devices/\(token)/messages"], logDirectory: directory.url.path)
        guard try await offPool({ child.waitForOutput({ $0.contains(": connected") }) }) else {
            throw HarnessError("message stream did not open")
        }
        return child
    }

    func logEntries() async throws -> [[String: Any]] {
        let (_, body) = try await device("GET", "/sim/log")
        return (body as? [[String: Any]]) ?? []
    }

    func metrics() async throws -> String {
        try await runTool(curl, ["-s", "\(deviceURL)/metrics"]).stdout
    }

    /// Runs a Python peer from `Tests/Peers` with `plan` and returns its JSON lines by case.
    func runPeer(_ script: String, plan: [String: Any]) async throws -> [String: [String: Any]] {
        let python = TestEnvironment.python
        guard FileManager.default.isExecutableFile(atPath: python) else {
            Issue.record("The test venv's Python is required (Scripts/venv, or set SIGNALFETCH_PYTHON)")
            throw HarnessError("python missing")
        }
        let planPath = directory.path("plan-\(UUID().uuidString.prefix(8)).json")
        try JSONSerialization.data(withJSONObject: plan).write(to: URL(fileURLWithPath: planPath))
        let peer = TestEnvironment.packageRoot.appendingPathComponent("Tests/Peers/\(script)").path
        let result = try await runTool(
            python, [peer, planPath], environment: ["REQUESTS_CA_BUNDLE": caPath, "SSL_CERT_FILE": caPath])
        var byCase: [String: [String: Any]] = [:]
        for line in result.stdout.split(separator: "\n") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let name = object["case"] as? String
            else { continue }
            byCase[name] = object
        }
        if byCase.isEmpty { Issue.record("\(script) printed nothing: \(result.stdout) \(result.stderr.suffix(3000))") }
        return byCase
    }

    func plan(account: Int = 0, sends: [[String: Any]]) -> [String: Any] {
        [
            "serviceAccount": accountPaths[account], "tokenURI": "\(providerURL)/token", "fcmBase": providerURL,
            "sends": sends,
        ]
    }

    deinit { process.stop(signal: SIGKILL) }
}

/// The `data:` events a message stream (curl's output) has received so far.
func receivedMessages(_ child: ChildProcess) -> [[String: Any]] {
    child.output.split(separator: "\n").compactMap { line -> [String: Any]? in
        guard line.hasPrefix("data: ") else { return nil }
        return try? JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8)) as? [String: Any]
    }
}

/// Waits until the stream has `count` events (or the timeout) and returns them.
func waitForMessages(_ child: ChildProcess, count: Int, timeout: Double = 10) async -> [[String: Any]] {
    _ = try? await offPool { child.waitForOutput(timeout: timeout) { _ in receivedMessages(child).count >= count } }
    return receivedMessages(child)
}
