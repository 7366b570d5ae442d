import APNsSimulator
import Durations
import Foundation
import OpenSSLCrypto
import TestSupport
import Testing

/// The answer curl got from the provider API.
struct PushResult {
    var status: Int
    var headers: [String: String]
    var body: String

    var apnsID: String? { headers["apns-id"] }

    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:]
    }

    var reason: String? { json["reason"] as? String }
}

/// An in-process simulator on loopback ports with a manual clock, a trusted signing key, and curl as the
/// provider and device client.
final class SimulatorHarness: Sendable {
    static let keyID = "KEY1234567"
    static let teamID = "TEAM123456"
    static let topic = "com.example.mail"

    let server: APNsSimulatorServer
    let clock: ManualClock
    let key: P256PrivateKey
    let directory: TemporaryDirectory
    let curl: String

    init(
        allowedTopics: Set<String> = [topic, "com.example.other"], backgroundBudget: Int = 3,
        backgroundWindow: TimeInterval = 3600, faults: APNsFaults = APNsFaults(), sandbox: Bool = false
    ) async throws {
        curl = try requireTool("curl")
        directory = try TemporaryDirectory(prefix: "apns-sim-test")
        clock = ManualClock()
        key = try P256PrivateKey()
        let gateway = APNsGatewayConfiguration(
            providerKeys: [ProviderKey(keyID: Self.keyID, teamID: Self.teamID, publicKey: try key.publicKey)],
            allowedTopics: allowedTopics, backgroundBudget: backgroundBudget, backgroundWindow: backgroundWindow,
            faults: faults)
        server = APNsSimulatorServer(
            configuration: APNsSimulatorConfiguration(
                providerPort: 0, sandboxPort: sandbox ? 0 : nil, devicePort: 0, heartbeat: .seconds(5),
                tickInterval: .milliseconds(50),
                gateway: gateway),
            clock: clock)
        try server.start()
    }

    func stop() async { await server.shutdown() }

    var deviceURL: String { "http://127.0.0.1:\(server.devicePort)" }

    /// A provider token for the trusted key, issued `age` seconds before the clock's now.
    func providerToken(age: TimeInterval = 0, key: P256PrivateKey? = nil, keyID: String = keyID) throws -> String {
        let issuedAt = Int64(clock.now().timeIntervalSince1970 - age)
        return try JWT.makeES256(
            claims: JWTClaims(keyID: keyID, issuer: Self.teamID, issuedAt: issuedAt), key: key ?? self.key)
    }

    /// Registers a device through the device API.
    func registerDevice(topic: String = topic, environment: String = "sandbox") async throws -> String {
        let result = try await runTool(
            curl,
            [
                "-s", "-X", "POST", "-H", "content-type: application/json", "--data-binary",
                #"{"topic":"\#(topic)","environment":"\#(environment)"}"#, "\(deviceURL)/sim/devices",
            ])
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        guard let token = object?["deviceToken"] as? String else { throw HarnessError("registration failed") }
        return token
    }

    /// Sends one provider request with curl over h2c (to the sandbox listener when `sandbox`). `authorization:
    /// nil` sends none.
    func push(
        to token: String, path: String? = nil, method: String = "POST", authorization: String?? = .none,
        headers: [(String, String)] = [("apns-topic", topic)], body: String? = #"{"aps":{"badge":1}}"#,
        sandbox: Bool = false
    ) async throws -> PushResult {
        var arguments = ["-s", "-i", "--http2-prior-knowledge", "-X", method]
        let bearer: String?
        switch authorization {
        case .none: bearer = "bearer \(try providerToken())"
        case .some(let value): bearer = value
        }
        if let bearer { arguments += ["-H", "authorization: \(bearer)"] }
        for (name, value) in headers { arguments += ["-H", "\(name): \(value)"] }
        if let body {
            let file = directory.path("body-\(UUID().uuidString)")
            try Data(body.utf8).write(to: URL(fileURLWithPath: file))
            arguments += ["--data-binary", "@\(file)"]
        }
        let port = sandbox ? server.sandboxPort : server.providerPort
        arguments.append("http://127.0.0.1:\(port)\(path ?? "/3/device/\(token)")")
        let result = try await runTool(curl, arguments)
        return try Self.parseResponse(result.stdout)
    }

    static func parseResponse(_ text: String) throws -> PushResult {
        guard let split = text.range(of: "\r\n\r\n") else { throw HarnessError("no HTTP response: \(text)") }
        let lines = text[..<split.lowerBound].components(separatedBy: "\r\n")
        guard let statusLine = lines.first, let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "")
        else { throw HarnessError("bad status line") }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        return PushResult(status: status, headers: headers, body: String(text[split.upperBound...]))
    }

    /// Opens a notification stream with curl and waits until it is connected.
    func openStream(_ token: String) async throws -> ChildProcess {
        let child = try ChildProcess(
            curl, ["-sN", "\(deviceURL)/sim/devices/\(token)/notifications"], logDirectory: directory.url.path)
        guard try await offPool({ child.waitForOutput({ $0.contains(": connected") }) }) else {
            child.stop(signal: SIGKILL)
            throw HarnessError("notification stream did not open")
        }
        return child
    }

    /// Calls the control API with curl, as another team's test would; returns the status and the JSON body.
    func control(
        _ method: String, _ path: String, body: String? = nil
    ) async throws -> (
        status: Int, json: [String: Any]
    ) {
        var arguments = ["-s", "-X", method, "-w", "\n%{http_code}"]
        if let body { arguments += ["-H", "content-type: application/json", "--data-binary", body] }
        let result = try await runTool(curl, arguments + ["\(deviceURL)\(path)"])
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        let status = Int(lines.last ?? "") ?? 0
        let text = lines.dropLast().joined(separator: "\n")
        let json = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
        return (status, json)
    }

    /// The capture log.
    func log() async throws -> [[String: Any]] {
        let result = try await runTool(curl, ["-s", "\(deviceURL)/sim/log"])
        return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]] ?? []
    }

    /// The capture-log entry for `apnsID`.
    func logEntry(_ apnsID: String?) async throws -> [String: Any]? {
        try await log().first { $0["apnsId"] as? String == apnsID }
    }
}

/// The `data:` objects a curl SSE client has received so far.
func receivedEvents(_ child: ChildProcess) -> [[String: Any]] {
    child.output.split(separator: "\n").compactMap { line -> [String: Any]? in
        guard line.hasPrefix("data: ") else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8))) as? [String: Any]
    }
}

/// Waits until the SSE client has received `count` events (or the timeout passes) and returns them.
func waitForEvents(_ child: ChildProcess, count: Int, timeout: Double = 10) async -> [[String: Any]] {
    _ = try? await offPool { child.waitForOutput(timeout: timeout) { _ in receivedEvents(child).count >= count } }
    return receivedEvents(child)
}
