import Foundation
import OpenSSLCrypto
import TestSupport
import Testing
import WebPushSimulator

/// The libwebsockets listener inside this process (its service thread beside the test's), with the
/// Mozilla-protocol peer: the whole exchange, frames it must refuse, and a shutdown with sockets open.
@Suite struct WebSocketListenerTests {
    @Test func theMozillaPeerRunsAgainstAnInProcessServerThatThenStops() async throws {
        let directory = try TemporaryDirectory(prefix: "webpush-ws")
        let authority = try DevCertificates.makeCertificateAuthority(commonName: "webpush-sim test CA")
        let certificate = try DevCertificates.makeServerCertificate(hosts: ["127.0.0.1"], signedBy: authority)
        let caPath = directory.path("ca.pem")
        try authority.certificatePEM.write(toFile: caPath, atomically: true, encoding: .utf8)
        try certificate.certificatePEM.write(toFile: directory.path("server.pem"), atomically: true, encoding: .utf8)
        try certificate.privateKeyPEM.write(toFile: directory.path("server.key"), atomically: true, encoding: .utf8)
        // pywebpush speaks HTTP/1.1, which the push port relays only behind TLS.
        let server = WebPushSimulatorServer(
            configuration: WebPushSimulatorConfiguration(
                providerPort: 0,
                tls: .init(certificatePath: directory.path("server.pem"), privateKeyPath: directory.path("server.key")),
                devicePort: 0, mozillaHost: "127.0.0.1", mozillaPort: 0))
        try server.start()
        #expect(server.mozillaPort > 0)
        let key = try P256PrivateKey()
        let keyPath = directory.path("vapid.pem")
        try key.pemRepresentation.write(toFile: keyPath, atomically: true, encoding: .utf8)
        let planPath = directory.path("plan.json")
        let plan: [String: Any] = [
            "url": "ws://127.0.0.1:\(server.mozillaPort)/", "vapidKeyFile": keyPath,
            "applicationServerKey": Base64URL.encode(try key.publicKey.rawRepresentation), "abuse": true,
        ]
        try JSONSerialization.data(withJSONObject: plan).write(to: URL(fileURLWithPath: planPath))
        let python = TestEnvironment.python
        guard FileManager.default.isExecutableFile(atPath: python) else {
            Issue.record("The test venv's Python is required (Scripts/venv, or set SIGNALFETCH_PYTHON)")
            return
        }
        let result = try await runTool(
            python, [TestEnvironment.peer("webpush_mozilla.py"), planPath],
            environment: ["REQUESTS_CA_BUNDLE": caPath, "SSL_CERT_FILE": caPath])
        var byCase: [String: [String: Any]] = [:]
        for line in result.stdout.split(separator: "\n") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let name = object["case"] as? String
            else { continue }
            byCase[name] = object
        }
        #expect(result.status == 0, "\(result.stderr.suffix(3000))")
        #expect(byCase["notification"]?["plaintext"] as? String == "first signal")
        #expect(byCase["redelivered"]?["sameVersion"] as? Bool == true)
        #expect(byCase["largePing"]?["answer"] as? [String: String] == [:])
        #expect(byCase["unregister"]?["pushStatus"] as? Int == 410)
        #expect(byCase["abuse-binary"]?["closeStatus"] as? Int == 1003)
        #expect(byCase["abuse-oversize"]?["closeStatus"] as? Int == 1009)
        #expect(byCase["abuse-beforeHello"]?["closeStatus"] as? Int == 1002)
        #expect(byCase["abuse-notJSON"]?["closeStatus"] as? Int == 1002)
        #expect(server.gateway.metrics.acknowledged == 2)
        await server.shutdown()
        #expect(server.mozillaPort == 0)
    }
}
