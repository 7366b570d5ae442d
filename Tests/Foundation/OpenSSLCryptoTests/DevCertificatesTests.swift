import Foundation
import OpenSSLCrypto
import TestSupport
import Testing

@Suite struct DevCertificatesTests {
    @Test func serverCertificateVerifiesAgainstItsCA() throws {
        let dir = try TemporaryDirectory()
        let ca = try DevCertificates.makeCertificateAuthority(commonName: "SignalFetch Test CA")
        let server = try DevCertificates.makeServerCertificate(
            hosts: ["localhost", "127.0.0.1", "mailboxd"], signedBy: ca)
        try ca.certificatePEM.write(toFile: dir.path("ca.pem"), atomically: true, encoding: .utf8)
        try server.certificatePEM.write(toFile: dir.path("server.pem"), atomically: true, encoding: .utf8)
        let openssl = try #require(Subprocess.which("openssl"), "openssl CLI missing")
        let verified = try Subprocess.run(openssl, ["verify", "-CAfile", dir.path("ca.pem"), dir.path("server.pem")])
        #expect(verified.status == 0, "\(verified.stdout) \(verified.stderr)")
        let text = try Subprocess.run(openssl, ["x509", "-in", dir.path("server.pem"), "-noout", "-text"]).stdout
        #expect(text.contains("DNS:localhost"))
        #expect(text.contains("IP Address:127.0.0.1"))
        #expect(text.contains("DNS:mailboxd"))

        // A different CA does not vouch for it.
        let otherCA = try DevCertificates.makeCertificateAuthority(commonName: "Other CA")
        try otherCA.certificatePEM.write(toFile: dir.path("other.pem"), atomically: true, encoding: .utf8)
        #expect(
            try Subprocess.run(openssl, ["verify", "-CAfile", dir.path("other.pem"), dir.path("server.pem")]).status
                != 0)
    }

    /// curl accepts a TLS server using the certificate, by name and by IP, given only the CA.
    @Test func curlAcceptsTheCertificateOverTLS() throws {
        let dir = try TemporaryDirectory()
        let ca = try DevCertificates.makeCertificateAuthority(commonName: "SignalFetch Test CA")
        let server = try DevCertificates.makeServerCertificate(hosts: ["localhost", "127.0.0.1"], signedBy: ca)
        try ca.certificatePEM.write(toFile: dir.path("ca.pem"), atomically: true, encoding: .utf8)
        try server.certificatePEM.write(toFile: dir.path("server.pem"), atomically: true, encoding: .utf8)
        try server.privateKeyPEM.write(toFile: dir.path("server.key"), atomically: true, encoding: .utf8)
        let openssl = try #require(Subprocess.which("openssl"), "openssl CLI missing")
        let curl = try #require(Subprocess.which("curl"), "curl CLI missing")
        let port = freeLocalPort()
        let tlsServer = try ChildProcess(
            openssl,
            [
                "s_server", "-quiet", "-www", "-accept", "127.0.0.1:\(port)", "-cert", dir.path("server.pem"), "-key",
                dir.path("server.key"),
            ], logDirectory: dir.url.path)
        defer { tlsServer.stop() }
        try #require(waitForPort(port), "openssl s_server did not start: \(tlsServer.errorOutput)")
        let result = try Subprocess.run(
            curl,
            [
                "-sS", "--cacert", dir.path("ca.pem"), "-o", "/dev/null", "-w", "%{http_code}",
                "https://localhost:\(port)/",
            ])
        #expect(result.status == 0, "curl: \(result.stderr)")
        #expect(result.stdout == "200")
        let byIP = try Subprocess.run(
            curl, ["-sS", "--cacert", dir.path("ca.pem"), "-o", "/dev/null", "https://127.0.0.1:\(port)/"])
        #expect(byIP.status == 0, "curl by IP: \(byIP.stderr)")
        let untrusted = try Subprocess.run(curl, ["-sS", "-o", "/dev/null", "https://localhost:\(port)/"])
        #expect(untrusted.status == 60, "curl without the CA must refuse the certificate")
    }

    @Test func spkiPinMatchesOpenSSL() throws {
        let dir = try TemporaryDirectory()
        let ca = try DevCertificates.makeCertificateAuthority(commonName: "Pin CA")
        try ca.certificatePEM.write(toFile: dir.path("ca.pem"), atomically: true, encoding: .utf8)
        let pin = try DevCertificates.spkiSHA256Base64(certificatePEM: ca.certificatePEM)
        let shell = """
            openssl x509 -in "\(dir.path("ca.pem"))" -pubkey -noout | openssl pkey -pubin -outform der \
              | openssl dgst -sha256 -binary | base64
            """
        let expected = try Subprocess.run("/bin/sh", ["-c", shell]).stdout.trimmingCharacters(
            in: .whitespacesAndNewlines)
        #expect(pin == expected)
        let key = try P256PrivateKey(pemRepresentation: ca.privateKeyPEM)
        #expect(try key.publicKey.spkiSHA256Base64 == expected)
    }
}
