import Durations
import Foundation
import HTTP2Server
import Locking
import OpenSSLCrypto
import Push
import TestSupport
import Testing

@testable import PushWebPush

/// A push resource on loopback for the sender's tests: HTTP/2 over TLS, answering each request with the next
/// scripted status and keeping what it received.
final class RecordingPushResource: Sendable {
    struct Received: Sendable {
        var path: String
        var authority: String?
        var headers: [String: String]
        var body: [UInt8]
    }

    let server: HTTP2Server
    let directory: TemporaryDirectory
    let caFile: String
    private let state = LockedValue<(received: [Received], script: [(Int, [HTTPField])])>(([], []))

    init() throws {
        directory = try TemporaryDirectory(prefix: "webpush-resource")
        let authority = try DevCertificates.makeCertificateAuthority(commonName: "Push service test CA")
        let leaf = try DevCertificates.makeServerCertificate(hosts: ["127.0.0.1", "localhost"], signedBy: authority)
        caFile = directory.path("ca.pem")
        try authority.certificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        try leaf.certificatePEM.write(toFile: directory.path("cert.pem"), atomically: true, encoding: .utf8)
        try leaf.privateKeyPEM.write(toFile: directory.path("key.pem"), atomically: true, encoding: .utf8)
        let state = self.state
        server = HTTP2Server(
            configuration: HTTP2ServerConfiguration(
                host: "127.0.0.1", port: 0,
                tls: .init(certificateChainPath: directory.path("cert.pem"), privateKeyPath: directory.path("key.pem"))),
            inlineHandler: { request in
                var headers: [String: String] = [:]
                for header in request.headers { headers[header.name] = header.value }
                let next = state.withLock { state -> (Int, [HTTPField]) in
                    state.received.append(
                        Received(
                            path: request.path, authority: request.authority, headers: headers,
                            body: Array(request.body)))
                    return state.script.isEmpty ? (201, []) : state.script.removeFirst()
                }
                return HTTP2Response(status: next.0, headers: next.1)
            })
        try server.start()
    }

    deinit {
        let server = self.server
        Task { await server.shutdown() }
    }

    var origin: String { "https://127.0.0.1:\(server.port)" }
    var received: [Received] { state.withLock { $0.received } }

    /// The next answers, in order (201 once they run out).
    func script(_ answers: (Int, [HTTPField])...) { state.withLock { $0.script += answers } }
}

/// A browser's side of a subscription: its key pair and auth secret.
struct TestSubscription {
    let key = try! P256PrivateKey()
    let auth = SecureRandom.bytes(16)

    func registration(endpoint: String) throws -> DeviceRegistration {
        DeviceRegistration(
            service: .webpush,
            fields: [
                "subscription.endpoint": endpoint,
                "subscription.keys.p256dh": Base64URL.encode(try key.publicKey.rawRepresentation),
                "subscription.keys.auth": Base64URL.encode(auth),
            ])
    }
}

@Suite struct WebPushPushServiceTests {
    let vapidKey = try! P256PrivateKey()

    func service(
        allowing origin: String, caFile: String,
        clock: any WallClock = ManualClock(start: Date(timeIntervalSince1970: 1_800_000_000)),
        signalKind: PushSignal.Kind = .badge
    ) throws -> WebPushPushService {
        let host = String(origin.dropFirst("https://".count))
        return try WebPushPushService(
            configuration: try WebPushConfiguration(
                vapidKey: vapidKey, subject: "mailto:ops@example.com", caFile: caFile,
                endpointPolicy: WebPushEndpointPolicy(allowedHosts: [host]), signalKind: signalKind),
            clock: clock)
    }

    func signal(badge: Int? = 3) throws -> PushSignal {
        try PushSignal(alias: try DeviceAlias("a1B2c3D4e5F6g7H8"), tag: try StateTag("AbCdEfGhIjKlMnOp"), badge: badge)
    }

    @Test func backgroundSignalsGoAtLowUrgencyAndBadgeSignalsAtNormal() async throws {
        let resource = try RecordingPushResource()
        let browser = TestSubscription()
        for (kind, urgency) in [(PushSignal.Kind.background, "low"), (.badge, "normal")] {
            let sender = try service(allowing: resource.origin, caFile: resource.caFile, signalKind: kind)
            defer { sender.shutdown() }
            let address = try sender.address(for: try browser.registration(endpoint: resource.origin + "/push/u"))
            #expect(await sender.send(try signal(badge: kind == .badge ? 1 : nil), to: address) == .delivered)
            #expect(resource.received.last?.headers["urgency"] == urgency, "\(kind)")
        }
    }

    @Test func aSignalIsEncryptedToTheSubscriptionAndSignedForItsOrigin() async throws {
        let resource = try RecordingPushResource()
        let sender = try service(allowing: resource.origin, caFile: resource.caFile)
        defer { sender.shutdown() }
        let browser = TestSubscription()
        let address = try sender.address(for: try browser.registration(endpoint: resource.origin + "/push/abc?v=2"))
        #expect(address.token == resource.origin + "/push/abc?v=2")
        #expect(await sender.send(try signal(), to: address) == .delivered)

        let request = try #require(resource.received.first)
        #expect(request.path == "/push/abc?v=2")
        #expect(request.headers["ttl"] == "3600")
        #expect(request.headers["urgency"] == "normal")
        #expect(request.headers["content-encoding"] == "aes128gcm")
        let topic = try #require(request.headers["topic"])
        #expect(topic.count == 32 && SignalCharset.matches(topic.utf8, lengths: 32...32, SignalCharset.isBase64URLByte))
        #expect(request.body.count == WebPushMessage.bodyLength)

        let decrypted = try WebPushEncryption.decrypt(request.body, receiverKey: browser.key, authSecret: browser.auth)
        #expect(
            String(decoding: decrypted.plaintext, as: UTF8.self)
                == #"{"acct":"a1B2c3D4e5F6g7H8","st":"AbCdEfGhIjKlMnOp","badge":3}"#)

        // VAPID: `t` verifies with `k`, `aud` is the origin, `exp` within 24 h, `sub` the contact.
        let authorization = try #require(request.headers["authorization"])
        #expect(authorization.hasPrefix("vapid t="))
        let parts = authorization.dropFirst("vapid ".count).split(separator: ",").map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        let token = String(try #require(parts.first { $0.hasPrefix("t=") }).dropFirst(2))
        let k = String(try #require(parts.first { $0.hasPrefix("k=") }).dropFirst(2))
        #expect(k == sender.vapidPublicKey)
        let jwt = try JWT.verifyES256General(token, key: try P256PublicKey(rawRepresentation: Base64URL.decode(k)!))
        #expect(jwt[claim: "aud"] == .string(resource.origin))
        #expect(jwt[claim: "sub"] == .string("mailto:ops@example.com"))
        let exp = try #require(jwt[claim: "exp"]?.integerValue)
        #expect(exp > 1_800_000_000 && exp <= 1_800_000_000 + 86_400)
    }

    @Test func everyBodyHasTheSameLengthAndAFreshKey() async throws {
        let resource = try RecordingPushResource()
        let sender = try service(allowing: resource.origin, caFile: resource.caFile)
        defer { sender.shutdown() }
        let browser = TestSubscription()
        let address = try sender.address(for: try browser.registration(endpoint: resource.origin + "/push/x"))
        let signals = [
            try signal(badge: nil), try signal(badge: 0), try signal(badge: 123_456_789),
            try PushSignal(alias: try DeviceAlias(String(repeating: "z", count: 64)), tag: nil, badge: Int(Int32.max)),
        ]
        for signal in signals { #expect(await sender.send(signal, to: address) == .delivered) }
        let bodies = resource.received.map(\.body)
        #expect(Set(bodies.map(\.count)) == [WebPushMessage.bodyLength])
        #expect(Set(bodies.map { Array($0[21..<86]) }).count == signals.count)
        #expect(Set(resource.received.compactMap { $0.headers["authorization"] }).count == 1)  // one token per origin
        #expect(sender.connectionsOpened == 1)

        // The reference receiver (http_ece, what pywebpush encrypts with) reads each of them.
        let directory = try TemporaryDirectory()
        let plan: [String: Any] = [
            "privateKey": Base64URL.encode(try rawScalar(of: browser.key)), "auth": Base64URL.encode(browser.auth),
            "bodies": bodies.map { Base64URL.encode($0) },
        ]
        try JSONSerialization.data(withJSONObject: plan).write(to: URL(fileURLWithPath: directory.path("plan.json")))
        let result = try Subprocess.run(
            TestEnvironment.python, [TestEnvironment.peer("webpush_http_ece_decrypt.py"), directory.path("plan.json")])
        let lines = result.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        #expect(lines.count == signals.count, "\(result.stderr)")
        #expect(lines.allSatisfy { $0["ok"] as? Bool == true })
        #expect(lines.first?["plaintext"] as? String == #"{"acct":"a1B2c3D4e5F6g7H8","st":"AbCdEfGhIjKlMnOp"}"#)
    }

    @Test func answersBecomeOutcomes() async throws {
        let resource = try RecordingPushResource()
        let sender = try service(allowing: resource.origin, caFile: resource.caFile)
        defer { sender.shutdown() }
        let address = try sender.address(for: try TestSubscription().registration(endpoint: resource.origin + "/p"))
        resource.script(
            (404, []), (410, []), (401, []), (403, []), (429, [HTTPField("retry-after", "7")]), (429, []),
            (503, [HTTPField("retry-after", "2")]), (500, []), (413, []), (400, []), (202, []))
        var outcomes: [PushOutcome] = []
        for _ in 0..<11 { outcomes.append(await sender.send(try signal(), to: address)) }
        #expect(
            outcomes == [
                .dropRegistration(reason: "HTTP 404", unregisteredAt: nil),
                .dropRegistration(reason: "HTTP 410", unregisteredAt: nil),
                .dropRegistration(reason: "keyMismatch", unregisteredAt: nil),
                .dropRegistration(reason: "keyMismatch", unregisteredAt: nil),
                .retry(reason: "HTTP 429", retryAfter: 7), .retry(reason: "HTTP 429", retryAfter: 60),
                .retry(reason: "HTTP 503", retryAfter: 2), .retry(reason: "HTTP 500", retryAfter: nil),
                .defect(reason: "HTTP 413"), .defect(reason: "HTTP 400"), .delivered,
            ])
    }

    @Test func aLostPushServiceIsARetry() async throws {
        let port = freeLocalPort()
        let sender = try service(allowing: "https://127.0.0.1:\(port)", caFile: "/dev/null")
        defer { sender.shutdown() }
        let address = try sender.address(
            for: try TestSubscription().registration(endpoint: "https://127.0.0.1:\(port)/p"))
        #expect(await sender.send(try signal(), to: address) == .retry(reason: "transport", retryAfter: nil))
    }

    @Test func loopbackOutsideTheAllowListIsRefusedAtRegistrationAndNeverRequested() async throws {
        let resource = try RecordingPushResource()
        let sender = try service(allowing: "https://127.0.0.1:1", caFile: resource.caFile)
        defer { sender.shutdown() }
        let browser = TestSubscription()
        for endpoint in [
            "https://127.0.0.2:\(resource.server.port)/p", "https://[::1]:\(resource.server.port)/p",
            "https://localhost:\(resource.server.port)/p", resource.origin + "/p",
        ] {
            #expect(throws: RegistrationError.self) {
                try sender.address(for: try browser.registration(endpoint: endpoint))
            }
        }
        // An address stored before the policy changed is refused at send time, before any request.
        let stale = PushAddress(
            service: .webpush, token: resource.origin + "/p", app: "",
            keys: try storedKeys(browser))
        #expect(await sender.send(try signal(), to: stale) == .defect(reason: "endpointRefused"))
        #expect(resource.received.isEmpty)
    }

    @Test func malformedKeysAreRefusedWithoutEchoingThem() throws {
        let sender = try service(allowing: "https://127.0.0.1:1", caFile: "/dev/null")
        defer { sender.shutdown() }
        var offCurve = Array(try TestSubscription().key.publicKey.rawRepresentation)
        offCurve[50] ^= 0x55
        let cases: [(String, String)] = [
            ("subscription.keys.p256dh", Base64URL.encode(offCurve)),
            ("subscription.keys.p256dh", Base64URL.encode(SecureRandom.bytes(33))),
            ("subscription.keys.p256dh", "not base64!"),
            ("subscription.keys.auth", Base64URL.encode(SecureRandom.bytes(15))),
            ("subscription.keys.auth", Base64URL.encode(SecureRandom.bytes(32))),
            ("subscription.expirationTime", "soon"),
        ]
        for (field, value) in cases {
            var registration = try TestSubscription().registration(endpoint: "https://127.0.0.1:1/p")
            registration.fields[field] = value
            do {
                _ = try sender.address(for: registration)
                Issue.record("\(field) = \(value) was accepted")
            } catch {
                #expect(["invalidKeys", "invalidArgument"].contains(error.code))
                #expect(!error.message.contains(value))
            }
        }
    }

    @Test func vapidTokensAreReusedPerOriginAndReplacedAtHalfTheirLife() throws {
        let clock = ManualClock(start: Date(timeIntervalSince1970: 1_800_000_000))
        let tokens = try VAPIDTokens(key: vapidKey, subject: "https://example.com/contact", clock: clock)
        let first = try tokens.authorization(for: "https://a.example")
        #expect(try tokens.authorization(for: "https://a.example") == first)
        #expect(try tokens.authorization(for: "https://b.example") != first)
        clock.advance(by: VAPIDTokens.lifetime / 2 + 1)
        #expect(try tokens.authorization(for: "https://a.example") != first)
        for index in 0..<(WebPushPushService.maximumOrigins + 10) {
            _ = try tokens.authorization(for: "https://push\(index).example")
        }
        #expect(tokens.cachedOrigins <= WebPushPushService.maximumOrigins, "the token cache is bounded")
        #expect(VAPIDTokens.isValidSubject("mailto:a@b.example"))
        #expect(!VAPIDTokens.isValidSubject("mailto:nobody"))
        #expect(!VAPIDTokens.isValidSubject("http://example.com"))
        #expect(throws: WebPushConfigurationError.self) {
            try WebPushConfiguration(vapidKey: vapidKey, subject: "ops@example.com")
        }
    }

    @Test func theGuardRefusesAnythingButTheSignalsFields() {
        #expect(throws: Never.self) {
            try WebPushPayloadGuard.check(Array(#"{"acct":"abc","st":"AbCdEfGhIjKlMnOp","badge":2}"#.utf8))
        }
        for bad in [
            #"{"acct":"abc","subject":"Hello"}"#, #"{"acct":"a b"}"#, #"{"acct":"abc","badge":-1}"#,
            #"{"acct":"abc","badge":"2"}"#, #"{"acct":"abc","st":"short"}"#, "[]",
            #"{"acct":"\#(String(repeating: "a", count: 160))"}"#,
        ] {
            #expect(throws: WebPushPayloadGuard.Violation.self) { try WebPushPayloadGuard.check(Array(bad.utf8)) }
        }
    }

    func storedKeys(_ browser: TestSubscription) throws -> String {
        Base64URL.encode(try browser.key.publicKey.rawRepresentation) + "." + Base64URL.encode(browser.auth)
    }

    /// The 32-byte scalar of a key, read back from its PKCS#8 PEM (for the Python receiver).
    func rawScalar(of key: P256PrivateKey) throws -> [UInt8] {
        let pem = try key.pemRepresentation
        let base64 = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        let der = try #require(Data(base64Encoded: base64))
        // PKCS#8 for P-256: the SEC1 ECPrivateKey's OCTET STRING of 32 bytes follows `04 20`.
        let bytes = Array(der)
        let marker = try #require((0..<(bytes.count - 34)).first { bytes[$0] == 0x04 && bytes[$0 + 1] == 0x20 })
        return Array(bytes[(marker + 2)..<(marker + 34)])
    }
}
