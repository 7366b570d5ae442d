import APNsSimulator
import Foundation
import OpenSSLCrypto
import TestSupport
import Testing

/// The real `apns-sim` binary over TLS with real APNs clients: Python's aioapns and curl with a token
/// signed by the openssl CLI; also its configuration by environment and its graceful shutdown.
@Suite("Real clients against the apns-sim binary")
struct ClientInteropTests {
    /// A running `apns-sim` process with its TLS material and provider key.
    final class RunningSimulator: Sendable {
        let directory: TemporaryDirectory
        let process: ChildProcess
        let providerPort: Int
        let devicePort: Int
        /// The sandbox listener's port, when started with `--sandbox-listen`.
        let sandboxPort: Int?
        let curl: String
        let keyPath: String
        let caPath: String
        static let topic = "com.example.mail"

        init(extraArguments: [String] = [], environment: [String: String] = [:]) throws {
            curl = try requireTool("curl")
            let executable = TestEnvironment.executable("apns-sim").path
            guard FileManager.default.isExecutableFile(atPath: executable) else {
                Issue.record("apns-sim is not built at \(executable); run swift build first")
                throw HarnessError("apns-sim missing")
            }
            directory = try TemporaryDirectory(prefix: "apns-sim-bin")
            let authority = try DevCertificates.makeCertificateAuthority(commonName: "apns-sim test CA")
            let serverCertificate = try DevCertificates.makeServerCertificate(
                hosts: ["localhost", "127.0.0.1"], signedBy: authority)
            caPath = directory.path("ca.pem")
            keyPath = directory.path("key.p8")
            let signingKey = try P256PrivateKey()
            try authority.certificatePEM.write(toFile: caPath, atomically: true, encoding: .utf8)
            try serverCertificate.certificatePEM.write(
                toFile: directory.path("server.pem"), atomically: true, encoding: .utf8)
            try serverCertificate.privateKeyPEM.write(
                toFile: directory.path("server.key"), atomically: true, encoding: .utf8)
            try signingKey.pemRepresentation.write(toFile: keyPath, atomically: true, encoding: .utf8)
            try signingKey.publicKey.pemRepresentation.write(
                toFile: directory.path("key.pub.pem"), atomically: true, encoding: .utf8)
            let arguments =
                [
                    "--listen", "127.0.0.1:0", "--device-listen", "127.0.0.1:0",
                    "--provider-key", "KEY1234567:TEAM123456:\(directory.path("key.pub.pem"))",
                    "--topic", Self.topic,
                ] + extraArguments
            var fullEnvironment = environment
            fullEnvironment["APNS_SIM_TLS_CERT"] = directory.path("server.pem")
            fullEnvironment["APNS_SIM_TLS_KEY"] = directory.path("server.key")
            process = try ChildProcess(
                executable, arguments, environment: fullEnvironment, logDirectory: directory.url.path)
            let ports = try process.listeningPorts(prefix: "apns-sim listening ")
            guard let provider = ports["provider"], let device = ports["device"]
            else { throw HarnessError("apns-sim did not name its ports: \(process.errorOutput)") }
            (providerPort, devicePort, sandboxPort) = (Int(provider), Int(device), ports["sandbox"].map(Int.init))
        }

        var deviceURL: String { "http://127.0.0.1:\(devicePort)" }

        static func start(
            extraArguments: [String] = [], environment: [String: String] = [:]
        ) async throws
            -> RunningSimulator
        {
            try await offPool { try RunningSimulator(extraArguments: extraArguments, environment: environment) }
        }

        func registerDevice(environment: String = "sandbox") async throws -> String {
            let body = #"{"topic":"\#(Self.topic)","environment":"\#(environment)"}"#
            let result = try await runTool(
                curl, ["-s", "-X", "POST", "--data-binary", body, "\(deviceURL)/sim/devices"])
            let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            guard let token = object?["deviceToken"] as? String else { throw HarnessError("registration failed") }
            return token
        }

        func openStream(_ token: String) async throws -> ChildProcess {
            let child = try ChildProcess(
                curl, ["-sN", "\(deviceURL)/sim/devices/\(token)/notifications"], logDirectory: directory.url.path)
            guard try await offPool({ child.waitForOutput({ $0.contains(": connected") }) }) else {
                throw HarnessError("notification stream did not open")
            }
            return child
        }

        func providerToken() throws -> String {
            let key = try P256PrivateKey(pemRepresentation: String(contentsOfFile: keyPath, encoding: .utf8))
            let claims = JWTClaims(
                keyID: "KEY1234567", issuer: "TEAM123456", issuedAt: Int64(Date().timeIntervalSince1970))
            return try JWT.makeES256(claims: claims, key: key)
        }

        deinit { process.stop(signal: SIGKILL) }
    }

    /// The test venv's Python (with aioapns); records an issue when it is missing.
    static func aioapnsPython() -> String? {
        let python = TestEnvironment.python
        guard FileManager.default.isExecutableFile(atPath: python) else {
            Issue.record("Python with aioapns is required: set SIGNALFETCH_PYTHON (e.g. /work/venv/bin/python3)")
            return nil
        }
        return python
    }

    @Test func aioapnsSendsOverTLSAndDeviceReceives() async throws {
        guard let python = Self.aioapnsPython() else { return }
        let simulator = try await RunningSimulator.start()
        let token = try await simulator.registerDevice()
        let stream = try await simulator.openStream(token)
        let script = TestEnvironment.peer("apns_aioapns.py")
        let run = try await runTool(
            python, [script, "\(simulator.providerPort)", simulator.caPath, simulator.keyPath, token])
        let results = try #require(
            try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: [String: Any]],
            "aioapns output: \(run.stdout) \(run.stderr.suffix(2000))")
        let events = await waitForEvents(stream, count: 2)
        stream.stop(signal: SIGKILL)

        #expect(results["background"]?["status"] as? String == "200")
        #expect(results["badge"]?["status"] as? String == "200")
        #expect(results["badToken"]?["status"] as? String == "400")
        #expect(results["badToken"]?["reason"] as? String == "BadDeviceToken")
        #expect(results["tooLarge"]?["status"] as? String == "413")
        #expect(results["tooLarge"]?["reason"] as? String == "PayloadTooLarge")
        #expect(events.count == 2)
        let background = events.first { $0["pushType"] as? String == "background" }
        #expect(background?["apnsId"] as? String == results["background"]?["id"] as? String)
        #expect(background?["priority"] as? Int == 5)
        #expect((background?["payload"] as? [String: Any])?["st"] as? String == "s1")
        let badge = events.first { $0["pushType"] as? String == "alert" }
        #expect(((badge?["payload"] as? [String: Any])?["aps"] as? [String: Any])?["badge"] as? Int == 4)
    }

    @Test func aioapnsAgainstBothListeners() async throws {
        guard let python = Self.aioapnsPython() else { return }
        let simulator = try await RunningSimulator.start(extraArguments: ["--sandbox-listen", "127.0.0.1:0"])
        let sandboxPort = try #require(simulator.sandboxPort, "apns-sim names its sandbox listener at start")
        let production = try await simulator.registerDevice(environment: "production")
        let sandbox = try await simulator.registerDevice(environment: "sandbox")
        let productionStream = try await simulator.openStream(production)
        let sandboxStream = try await simulator.openStream(sandbox)
        let script = TestEnvironment.peer("apns_two_environments.py")
        let run = try await runTool(
            python,
            [
                script, "\(simulator.providerPort)", "\(sandboxPort)", simulator.caPath, simulator.keyPath, production,
                sandbox,
            ])
        let results = try #require(
            try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: [String: Any]],
            "aioapns output: \(run.stdout) \(run.stderr.suffix(2000))")
        let productionEvents = await waitForEvents(productionStream, count: 1)
        let sandboxEvents = await waitForEvents(sandboxStream, count: 1)
        productionStream.stop(signal: SIGKILL)
        sandboxStream.stop(signal: SIGKILL)

        #expect(sandboxPort != simulator.providerPort)
        #expect(results["production->production"]?["status"] as? String == "200")
        #expect(results["sandbox->sandbox"]?["status"] as? String == "200")
        #expect(results["production->sandbox"]?["status"] as? String == "400")
        #expect(results["production->sandbox"]?["reason"] as? String == "BadDeviceToken")
        #expect(results["sandbox->production"]?["status"] as? String == "400")
        #expect(results["sandbox->production"]?["reason"] as? String == "BadDeviceToken")
        #expect(productionEvents.count == 1 && sandboxEvents.count == 1)
    }

    @Test func curlWithOpensslSignedTokenGets200() async throws {
        let openssl = try requireTool("openssl")
        let simulator = try await RunningSimulator.start()
        let token = try await simulator.registerDevice()
        let directory = simulator.directory

        let header = Base64URL.encode(Array(#"{"alg":"ES256","kid":"KEY1234567"}"#.utf8))
        let claims = Base64URL.encode(
            Array(#"{"iss":"TEAM123456","iat":\#(Int(Date().timeIntervalSince1970))}"#.utf8))
        let signingInput = "\(header).\(claims)"
        try signingInput.write(toFile: directory.path("input.txt"), atomically: true, encoding: .utf8)
        let sign = try await runTool(
            openssl,
            [
                "dgst", "-sha256", "-sign", simulator.keyPath, "-out", directory.path("sig.der"),
                directory.path("input.txt"),
            ])
        #expect(sign.status == 0, "openssl dgst: \(sign.stderr)")
        let parsed = try await runTool(openssl, ["asn1parse", "-inform", "DER", "-in", directory.path("sig.der")])
        let integers = parsed.stdout.split(separator: "\n").filter { $0.contains("INTEGER") }.compactMap {
            $0.split(separator: ":").last.map(String.init)
        }
        try #require(integers.count == 2, "asn1parse output: \(parsed.stdout)")
        var raw: [UInt8] = []
        for hex in integers {
            let bytes = try #require(Hex.decode(hex.count % 2 == 1 ? "0" + hex : hex))
            let trimmed = Array(bytes.drop { $0 == 0 }.suffix(32))
            raw += [UInt8](repeating: 0, count: 32 - trimmed.count) + trimmed
        }
        let jwt = "\(signingInput).\(Base64URL.encode(raw))"

        let result = try await runTool(
            simulator.curl,
            [
                "-s", "-i", "--http2", "--cacert", simulator.caPath, "-H", "authorization: bearer \(jwt)",
                "-H", "apns-topic: \(RunningSimulator.topic)", "-H", "apns-push-type: alert",
                "--data-binary", #"{"aps":{"badge":2}}"#,
                "https://localhost:\(simulator.providerPort)/3/device/\(token)",
            ])
        let response = try SimulatorHarness.parseResponse(result.stdout)
        #expect(response.status == 200, "curl: \(result.stdout) \(result.stderr)")
        #expect(result.stdout.hasPrefix("HTTP/2 200"))
        #expect(response.apnsID != nil)
    }

    @Test func environmentConfiguresFlagsAndSigtermStopsGracefully() async throws {
        let simulator = try await RunningSimulator.start(environment: [
            "APNS_SIM_FAULT_503": "1", "APNS_SIM_FAULT_SEED": "3",
        ])
        let token = try await simulator.registerDevice()
        let harnessCurl = simulator.curl
        let result = try await runTool(
            harnessCurl,
            [
                "-s", "-i", "--http2", "--cacert", simulator.caPath, "-H", "apns-topic: \(RunningSimulator.topic)",
                "-H", "authorization: bearer \(try simulator.providerToken())", "--data-binary",
                #"{"aps":{"badge":2}}"#, "https://127.0.0.1:\(simulator.providerPort)/3/device/\(token)",
            ])
        let response = try SimulatorHarness.parseResponse(result.stdout)
        let status = try await offPool { simulator.process.stop(signal: SIGTERM, timeout: 15) }
        #expect(response.status == 503)
        #expect(response.reason == "ServiceUnavailable")
        #expect(status == 0, "exit status \(status); stderr: \(simulator.process.errorOutput)")
        #expect(simulator.process.errorOutput.contains("apns-sim: stopped"))
    }

    @Test func helpAndBadFlags() async throws {
        let executable = TestEnvironment.executable("apns-sim").path
        let help = try await runTool(executable, ["--help"])
        let bad = try await runTool(executable, ["--fault-drop", "2", "--h2c"])
        let unknown = try await runTool(executable, ["--h2c", "--bogus", "1"])
        let overOne = try await runTool(executable, ["--h2c", "--fault-drop", "0.6", "--fault-503", "0.6"])
        #expect(overOne.status == 2)
        #expect(overOne.stderr.contains("add up to at most 1"))
        #expect(help.status == 0)
        #expect(help.stdout.contains("--provider-key"))
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("--fault-drop"))
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("--bogus"))
    }
}
