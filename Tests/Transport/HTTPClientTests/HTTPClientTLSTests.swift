import Foundation
import TestSupport
import Testing

@testable import HTTPClient

@Suite struct HTTPClientTLSTests {
    /// A TLS HTTP/2 server with its own CA, plus a second, unrelated CA.
    private struct Fixture {
        let directory: TemporaryDirectory
        let certificates: TestCertificates
        let otherCertificates: TestCertificates
        let server: ServerProcess
        var url: String { "https://127.0.0.1:\(server.port)/index.html" }

        init() throws {
            directory = try TemporaryDirectory()
            certificates = try TestCertificates.make(in: directory, name: "trusted")
            otherCertificates = try TestCertificates.make(in: directory, name: "other")
            let docroot = directory.path("htdocs")
            try FileManager.default.createDirectory(atPath: docroot, withIntermediateDirectories: true)
            try "ok".write(toFile: docroot + "/index.html", atomically: true, encoding: .utf8)
            server = try ServerProcess.nghttpd(
                docroot: docroot, tls: (certificates.serverKey, certificates.serverCertificate))
        }
    }

    private func send(_ url: String, tls: TLSConfiguration) async throws -> HTTPClient.Response {
        let client = HTTPClient(configuration: .init(tls: tls))
        defer { client.shutdown() }
        return try await client.execute(HTTPClient.Request(url: url))
    }

    @Test func certificateFromUnknownCAIsRejected() async throws {
        let fixture = try Fixture()
        let systemStore = await #expect(throws: HTTPClientError.self) {
            try await send(fixture.url, tls: TLSConfiguration())
        }
        guard case .untrustedCertificate(let message) = systemStore else {
            Issue.record("expected untrustedCertificate, got \(String(describing: systemStore))")
            return
        }
        #expect(!message.isEmpty)

        let otherCA = await #expect(throws: HTTPClientError.self) {
            try await send(fixture.url, tls: TLSConfiguration(caFile: fixture.otherCertificates.caCertificate))
        }
        guard case .untrustedCertificate = otherCA else {
            Issue.record("expected untrustedCertificate, got \(String(describing: otherCA))")
            return
        }
    }

    @Test func matchingPinSucceedsAmongSeveral() async throws {
        let fixture = try Fixture()
        let response = try await send(
            fixture.url,
            tls: TLSConfiguration(
                caFile: fixture.certificates.caCertificate,
                pinnedPublicKeys: [fixture.otherCertificates.serverPin, "sha256//" + fixture.certificates.serverPin]))
        #expect(response.status == 200)
        #expect(String(decoding: response.body, as: UTF8.self) == "ok")
    }

    @Test func pinMismatchFails() async throws {
        let fixture = try Fixture()
        await #expect(throws: HTTPClientError.pinMismatch) {
            try await send(
                fixture.url,
                tls: TLSConfiguration(
                    caFile: fixture.certificates.caCertificate,
                    pinnedPublicKeys: [fixture.otherCertificates.serverPin]))
        }
    }

    @Test func unreadableClientCertificateIsATLSFailure() async throws {
        let fixture = try Fixture()
        let error = await #expect(throws: HTTPClientError.self) {
            try await send(
                fixture.url,
                tls: TLSConfiguration(
                    caFile: fixture.certificates.caCertificate,
                    clientCertificateFile: fixture.directory.path("missing.pem")))
        }
        guard case .tlsFailure = error else {
            Issue.record("expected tlsFailure, got \(String(describing: error))")
            return
        }
    }

    @Test func clientCertificateIsPresented() async throws {
        let fixture = try Fixture()
        // The server asks for a client certificate and ends the handshake when none is given.
        let docroot = fixture.directory.path("htdocs")
        let demanding = try ServerProcess.nghttpd(
            docroot: docroot, tls: (fixture.certificates.serverKey, fixture.certificates.serverCertificate),
            extraArguments: ["--verify-client"])
        let url = "https://127.0.0.1:\(demanding.port)/index.html"
        await #expect(throws: HTTPClientError.self) {
            try await send(url, tls: TLSConfiguration(caFile: fixture.certificates.caCertificate))
        }
        let response = try await send(
            url,
            tls: TLSConfiguration(
                caFile: fixture.certificates.caCertificate,
                clientCertificateFile: fixture.otherCertificates.serverCertificate,
                clientKeyFile: fixture.otherCertificates.serverKey))
        #expect(response.status == 200)
    }
}
