import Durations
import Foundation
import HTTP2Client
import OpenSSLCrypto
import Push
import PushWebPush
import SimulatorSupport
import TestSupport
import Testing
import WebPushSimulator

/// mailboxd's Web Push sender to a UnifiedPush distributor that speaks HTTP/1.1 only: webpush-sim in ntfy mode,
/// in process. The sender finds that the origin selects no `h2` and goes on over HTTP/1.1.
@Suite(.serialized) struct DistributorDeliveryTests {
    final class Distributor: Sendable {
        let server: WebPushSimulatorServer
        let directory: TemporaryDirectory
        let caFile: String

        init() throws {
            directory = try TemporaryDirectory(prefix: "distributor")
            let authority = try DevCertificates.makeCertificateAuthority(commonName: "Distributor test CA")
            let leaf = try DevCertificates.makeServerCertificate(hosts: ["127.0.0.1"], signedBy: authority)
            caFile = directory.path("ca.pem")
            try authority.certificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
            try leaf.certificatePEM.write(toFile: directory.path("cert.pem"), atomically: true, encoding: .utf8)
            try leaf.privateKeyPEM.write(toFile: directory.path("key.pem"), atomically: true, encoding: .utf8)
            server = WebPushSimulatorServer(
                configuration: WebPushSimulatorConfiguration(
                    providerPort: 0,
                    tls: SimulatorTLSFiles(
                        certificatePath: directory.path("cert.pem"), privateKeyPath: directory.path("key.pem")),
                    devicePort: 0, gateway: WebPushGatewayConfiguration(distributor: .ntfy)))
            try server.start()
        }

        deinit {
            let server = self.server
            Task { await server.shutdown() }
        }

        var origin: String { "https://127.0.0.1:\(server.providerPort)" }
    }

    let vapidKey = try! P256PrivateKey()

    /// mailboxd's sender allowed to reach the distributor, through `proxy` when given.
    func sender(for distributor: Distributor, proxy: HTTP2Client.Proxy? = nil) throws -> WebPushPushService {
        var configuration = try WebPushConfiguration(
            vapidKey: vapidKey, subject: "mailto:ops@example.com", caFile: distributor.caFile,
            endpointPolicy: WebPushEndpointPolicy(allowedHosts: ["127.0.0.1:\(distributor.server.providerPort)"]))
        configuration.proxy = proxy
        return try WebPushPushService(configuration: configuration)
    }

    /// A subscription at the distributor for the sender's VAPID key, registered with the sender: its id and the
    /// address the sender sends to.
    func subscribe(
        at distributor: Distributor, with sender: WebPushPushService
    ) throws -> (id: String, address: PushAddress) {
        let subscription = try distributor.server.gateway.subscribe(
            applicationServerKey: try vapidKey.publicKey.rawRepresentation)
        return (subscription.id, try sender.address(for: registration(subscription)))
    }

    func registration(_ subscription: WebPushCreatedSubscription) -> DeviceRegistration {
        DeviceRegistration(
            service: .webpush,
            fields: [
                "subscription.endpoint": subscription.endpoint, "subscription.keys.p256dh": subscription.p256dh,
                "subscription.keys.auth": subscription.auth,
            ])
    }

    @Test func aSignalReachesAnHTTP1OnlyDistributorAndIsDecrypted() async throws {
        let distributor = try Distributor()
        let sender = try sender(for: distributor)
        defer { sender.shutdown() }
        let gateway = distributor.server.gateway
        let (_, address) = try subscribe(at: distributor, with: sender)
        let signal = try PushSignal(
            alias: try DeviceAlias("a1B2c3D4e5F6g7H8"), tag: try StateTag("AbCdEfGhIjKlMnOp"), badge: 2)
        #expect(await sender.send(signal, to: address) == .delivered)
        #expect(await sender.send(signal, to: address) == .delivered, "the origin's HTTP/1.1 client is kept")
        let entries = gateway.logEntries()
        #expect(entries.map(\.status) == [200, 200])
        #expect(entries.allSatisfy { $0.httpVersion == "HTTP/1.1" })
        #expect(entries.allSatisfy { $0.headers.urgency == "normal" && $0.bodyBytes == 256 })
        #expect(entries.first?.vapid?.sub == "mailto:ops@example.com")
        // Both bodies decrypted with the subscription's keys (an undecryptable one is not kept) and wait for the
        // device, which has not connected.
        #expect(entries.allSatisfy { $0.outcome == .stored })
        #expect(gateway.subscriptions().first?.stored == 2)
    }

    /// Through `--push-proxy`: the HTTP/1.1 path tunnels too, with credentials (the proxy's log names the origin's
    /// address and port, never a path or the password), and the signal arrives.
    @Test func overHTTP1TheSignalGoesThroughTheProxyToTheCheckedAddress() async throws {
        let distributor = try Distributor()
        let proxy = try TinyProxy.start(in: distributor.directory.url.path, credentials: ("mail", "s3cret-pw"))
        let sender = try sender(
            for: distributor, proxy: try HTTP2Client.Proxy(url: "http://mail:s3cret-pw@127.0.0.1:\(proxy.port)"))
        defer { sender.shutdown() }
        let gateway = distributor.server.gateway
        let (_, address) = try subscribe(at: distributor, with: sender)
        let signal = try PushSignal(alias: try DeviceAlias("a1B2c3D4e5F6g7H8"), tag: nil, badge: 1)
        #expect(await sender.send(signal, to: address) == .delivered)
        #expect(gateway.logEntries().last?.httpVersion == "HTTP/1.1")
        let log = proxy.log
        // Two tunnels: the HTTP/2 attempt that found no h2, then the HTTP/1.1 connection.
        #expect(
            log.components(separatedBy: "CONNECT 127.0.0.1:\(distributor.server.providerPort)").count - 1 == 2, "\(log)"
        )
        #expect(!log.contains("/wpush/"))
        #expect(!log.contains("s3cret"))
    }

    @Test func aDistributorsRefusalsAreReadAsAnyPushServicesAre() async throws {
        let distributor = try Distributor()
        let sender = try sender(for: distributor)
        defer { sender.shutdown() }
        let gateway = distributor.server.gateway
        let (id, address) = try subscribe(at: distributor, with: sender)
        let signal = try PushSignal(alias: try DeviceAlias("a1B2c3D4e5F6g7H8"), tag: nil, badge: nil)
        #expect(gateway.scriptError(WebPushScriptedError(status: 429, count: 1, retryAfter: 30), for: id))
        #expect(await sender.send(signal, to: address) == .retry(reason: "HTTP 429", retryAfter: 30))
        #expect(gateway.scriptError(WebPushScriptedError(status: 413, count: 1), for: id))
        #expect(await sender.send(signal, to: address) == .defect(reason: "HTTP 413"))
        #expect(gateway.unsubscribe(id))
        #expect(await sender.send(signal, to: address) == .dropRegistration(reason: "HTTP 404", unregisteredAt: nil))
    }
}
