import Foundation
import OpenSSLCrypto
import TestSupport
import Testing

/// A running `webpush-sim` process (TLS push resources, the device API, the Mozilla protocol) on loopback.
final class RunningWebPushSimulator: Sendable {
    let directory: TemporaryDirectory
    let process: ChildProcess
    let providerPort: Int
    let devicePort: Int
    let mozillaPort: Int
    let curl: String
    let caPath: String

    init(extraArguments: [String] = [], environment: [String: String] = [:]) throws {
        curl = try requireTool("curl")
        let executable = TestEnvironment.executable("webpush-sim").path
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            Issue.record("webpush-sim is not built at \(executable); run swift build first")
            throw HarnessError("webpush-sim missing")
        }
        directory = try TemporaryDirectory(prefix: "webpush-sim-bin")
        let authority = try DevCertificates.makeCertificateAuthority(commonName: "webpush-sim test CA")
        let server = try DevCertificates.makeServerCertificate(hosts: ["localhost", "127.0.0.1"], signedBy: authority)
        caPath = directory.path("ca.pem")
        try authority.certificatePEM.write(toFile: caPath, atomically: true, encoding: .utf8)
        try server.certificatePEM.write(toFile: directory.path("server.pem"), atomically: true, encoding: .utf8)
        try server.privateKeyPEM.write(toFile: directory.path("server.key"), atomically: true, encoding: .utf8)
        var fullEnvironment = environment
        fullEnvironment["WEBPUSH_SIM_TLS_CERT"] = directory.path("server.pem")
        fullEnvironment["WEBPUSH_SIM_TLS_KEY"] = directory.path("server.key")
        fullEnvironment["WEBPUSH_SIM_MOZILLA_LISTEN"] = "127.0.0.1:0"
        process = try ChildProcess(
            executable, ["--listen", "127.0.0.1:0", "--device-listen", "127.0.0.1:0"] + extraArguments,
            environment: fullEnvironment, logDirectory: directory.url.path)
        let ports = try process.listeningPorts(prefix: "webpush-sim listening ")
        guard let provider = ports["provider"], let device = ports["device"], let mozilla = ports["mozilla"]
        else { throw HarnessError("webpush-sim did not name its ports: \(process.errorOutput)") }
        (providerPort, devicePort, mozillaPort) = (Int(provider), Int(device), Int(mozilla))
    }

    static func start(
        extraArguments: [String] = [], environment: [String: String] = [:]
    ) async throws
        -> RunningWebPushSimulator
    {
        try await offPool { try RunningWebPushSimulator(extraArguments: extraArguments, environment: environment) }
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

    /// `POST /sim/subscriptions` for `applicationServerKey`: the id and `PushSubscription.toJSON()`.
    func subscribe(applicationServerKey: String) async throws -> (id: String, subscription: [String: Any]) {
        let (status, body) = try await device(
            "POST", "/sim/subscriptions", #"{"applicationServerKey":"\#(applicationServerKey)"}"#)
        guard status == 201, let object = body as? [String: Any], let id = object["id"] as? String,
            let subscription = object["subscription"] as? [String: Any]
        else { throw HarnessError("subscription failed: \(status)") }
        return (id, subscription)
    }

    func openStream(_ id: String) async throws -> ChildProcess {
        let child = try ChildProcess(
            curl, ["-sN", "\(deviceURL)/sim/subscriptions/\(id)/messages"], logDirectory: directory.url.path)
        guard try await offPool({ child.waitForOutput({ $0.contains(": connected") }) }) else {
            throw HarnessError("message stream did not open")
        }
        return child
    }

    func logEntries() async throws -> [[String: Any]] {
        let (_, body) = try await device("GET", "/sim/log")
        return (body as? [[String: Any]]) ?? []
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
        let result = try await runTool(
            python, [TestEnvironment.peer(script), planPath],
            environment: ["REQUESTS_CA_BUNDLE": caPath, "SSL_CERT_FILE": caPath])
        var byCase: [String: [String: Any]] = [:]
        for line in result.stdout.split(separator: "\n") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let name = object["case"] as? String
            else { continue }
            byCase[name] = object
        }
        if byCase.isEmpty || result.status != 0 {
            Issue.record("\(script) failed: \(result.stdout.suffix(2000)) \(result.stderr.suffix(3000))")
        }
        return byCase
    }

    /// Writes an application server's VAPID key as PEM for a peer.
    func writeKey(_ key: P256PrivateKey) throws -> String {
        let path = directory.path("vapid-\(UUID().uuidString.prefix(8)).pem")
        try key.pemRepresentation.write(toFile: path, atomically: true, encoding: .utf8)
        return path
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
