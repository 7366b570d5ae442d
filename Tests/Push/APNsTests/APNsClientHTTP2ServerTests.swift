import Foundation
import HTTP2Server
import Locking
import OpenSSLCrypto
import TestSupport
import Testing

@testable import APNs

@Suite("APNsClient against the in-process HTTP2Server", .serialized)
struct APNsClientHTTP2ServerTests {
    let directory: TemporaryDirectory
    let caFile: String
    let tls: HTTP2ServerConfiguration.TLS
    let tokens: ProviderTokenManager

    init() throws {
        directory = try TemporaryDirectory(prefix: "apns-h2")
        let authority = try DevCertificates.makeCertificateAuthority(commonName: "APNs test CA")
        let server = try DevCertificates.makeServerCertificate(hosts: ["127.0.0.1"], signedBy: authority)
        caFile = directory.path("ca.pem")
        try authority.certificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        try server.certificatePEM.write(toFile: directory.path("server.pem"), atomically: true, encoding: .utf8)
        try server.privateKeyPEM.write(toFile: directory.path("server.key"), atomically: true, encoding: .utf8)
        tls = .init(certificateChainPath: directory.path("server.pem"), privateKeyPath: directory.path("server.key"))
        tokens = ProviderTokenManager(
            signingKey: APNsSigningKey(privateKey: try P256PrivateKey(), keyID: "KEYID00001", teamID: "TEAM000001"))
    }

    func makeClient(_ server: HTTP2Server) -> APNsClient {
        APNsClient(
            configuration: .init(
                endpoint: .custom(url: "https://127.0.0.1:\(server.port)", caFile: caFile),
                authentication: .token(tokens)))
    }

    @Test func goAwayMovesLaterSendsToANewConnection() async throws {
        let count = LockedValue(0)
        let server = HTTP2Server(configuration: .init(tls: tls)) { request in
            let index = count.withLock { value -> Int in
                value += 1
                return value
            }
            if index == 5 { request.goAwayAfterResponse() }
            return HTTP2Response(status: 200, headers: [.init("apns-id", request.header("apns-id") ?? "")])
        }
        try server.start()
        let client = makeClient(server)
        for index in 0..<20 {
            let report = await client.deliver(
                try APNsNotification(deviceToken: testDeviceToken(index), signal: .background(), topic: testTopic),
                retry: .init(baseDelay: .milliseconds(1)))
            #expect(report.action == .done)
        }
        #expect(count.withLock { $0 } >= 20)
        #expect(client.connectionsOpened == 2)
        await server.shutdown()
    }

    @Test func manyConcurrentSendsWithASmallStreamLimit() async throws {
        let received = LockedValue(0)
        let server = HTTP2Server(configuration: .init(tls: tls, maxConcurrentStreams: 8)) { request in
            received.withLock { $0 += 1 }
            guard request.method == "POST", request.header("authorization")?.hasPrefix("bearer ") == true,
                request.header("apns-push-type") == "background", request.header("apns-priority") == "5"
            else {
                return HTTP2Response(status: 400, body: Data(#"{"reason":"BadPriority"}"#.utf8))
            }
            try await Task.sleep(for: .milliseconds(5))
            if request.path.hasSuffix("00000007") {
                return HTTP2Response(
                    status: 410, headers: [.init("apns-id", "gone")],
                    body: Data(#"{"reason":"Unregistered","timestamp":1700000000000}"#.utf8))
            }
            return HTTP2Response(status: 200, headers: [.init("apns-id", request.header("apns-id") ?? "")])
        }
        try server.start()
        let client = makeClient(server)
        let result = await client.benchmark(count: 300, concurrency: 300) { index in
            try! APNsNotification(deviceToken: testDeviceToken(index), signal: .background(), topic: testTopic)
        }
        #expect(result.succeeded == 299)
        #expect(result.failed == 1)
        #expect(received.withLock { $0 } == 300)
        #expect(client.connectionsOpened == 1)
        #expect(await tokens.tokensIssued == 1)

        let report = await client.deliver(
            try APNsNotification(deviceToken: testDeviceToken(7), signal: .background(), topic: testTopic))
        #expect(
            report.action
                == .dropRegistration(reason: .unregistered, timestamp: Date(timeIntervalSince1970: 1_700_000_000)))
        await server.shutdown()
    }
}
