import Foundation
import HTTPServer
import Locking
import MailboxHTTPAPI
import MailboxService
import MailboxStore
import OpenSSLCrypto
import Push
import PushAPNs
import ServiceMetrics
import SignalDispatch

/// mailboxd's API on a real store in a temporary folder, with an account, a session, a device and a message,
/// so a fuzzed request can reach every handler. Bad input must get a 4xx, never a 5xx.
final class APIFuzz: Sendable {
    static let shared = APIFuzz()

    static let sessionToken = "fuzz-session-token"
    static let deliveryToken = "fuzz-delivery-token"
    let router: Router
    let messageID: String

    private init() {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("signalfetch-fuzz-\(getpid())").path
        try? FileManager.default.removeItem(atPath: folder)
        try! FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var storeConfiguration = MailboxStore.Configuration()
        storeConfiguration.synchronous = .normal
        storeConfiguration.passwordParameters = .testing
        let store = try! MailboxStore(path: folder + "/mailbox.sqlite", configuration: storeConfiguration)
        let configuration = MailboxAPI.Settings(deliveryToken: Self.deliveryToken)
        let (messageID, ready) = Self.blocking {
            let account = try! await store.createAccount(username: "fuzz", password: "fuzz-password")
            _ = try! await store.createSession(
                accountID: account.id, tokenHash: SHA256.hash(Self.sessionToken), deviceName: "fuzz")
            _ = try! await store.registerDevice(
                address: PushAddress(
                    service: .apns, token: String(repeating: "ab", count: 32), app: "com.example.fuzz",
                    environment: .sandbox),
                accountID: account.id, sessionID: nil)
            let receipt = try! await store.deliver(
                NewMessage(to: "fuzz", from: "a@example.com", subject: "seed", body: "seed"))
            return (receipt.id, true)
        }
        precondition(ready)
        self.messageID = messageID
        // The real APNs service checks registrations; nothing is sent (no dispatcher runs).
        let keyFile = folder + "/key.p8"
        try! (try! P256PrivateKey()).pemRepresentation.write(toFile: keyFile, atomically: true, encoding: .utf8)
        let apns = try! APNsPushService(
            configuration: APNsConfiguration(
                production: "https://127.0.0.1:1", sandbox: "https://127.0.0.1:1", caFile: nil,
                apps: [.init(topic: "com.example.fuzz", keyFile: keyFile, keyID: "KEY1234567", teamID: "TEAM123456")]))
        router =
            MailboxAPI(
                store: store, configuration: configuration, metrics: Metrics(), push: PushRouter([apns])
            ).router
    }

    /// Runs `body` on the concurrency pool and waits for it (the fuzzer's thread is not part of the pool).
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T { waitForTask(body) }

    /// The operations, picked by the input's first byte; the rest is the body, the query or a path segment.
    /// `{id}` in an input stands for the seeded message's id.
    static let operations: [(HTTPMethod, String, Part)] = [
        (.post, "/v1/session", .body), (.post, "/v1/devices", .body), (.patch, "/v1/messages/{id}", .body),
        (.post, "/v1/deliveries", .body), (.get, "/v1/changes", .query), (.get, "/v1/messages", .query),
        (.delete, "/v1/devices/", .segment), (.get, "/v1/messages/", .segment), (.delete, "/v1/messages/", .segment),
        (.delete, "/v1/session", .body),
    ]

    enum Part { case body, query, segment }

    func request(_ bytes: Data) {
        guard let selector = bytes.first else { return }
        let (method, template, part) = Self.operations[Int(selector) % Self.operations.count]
        let rest = Data(bytes.dropFirst())
        let text = String(decoding: rest, as: UTF8.self).replacingOccurrences(of: "{id}", with: messageID)
        var path = template.replacingOccurrences(of: "{id}", with: messageID)
        var query = ""
        var body = Data()
        switch part {
        case .body: body = text == String(decoding: rest, as: UTF8.self) ? rest : Data(text.utf8)
        case .query: query = text
        case .segment: path += text
        }
        let token = path == "/v1/deliveries" ? Self.deliveryToken : Self.sessionToken
        // DELETE /v1/session would revoke the session the other operations use: send it with a wrong token.
        let bearer = method == .delete && path == "/v1/session" ? "not-the-session" : token
        let request = HTTPRequest(
            method: method, path: path, queryString: query,
            headers: ["Authorization": "Bearer \(bearer)", "Content-Type": "application/json"], body: body,
            remoteAddress: "127.0.0.1")
        let router = self.router
        let status = Self.blocking { () -> Int in
            do {
                return try await router.handle(request).status.rawValue
            } catch let error as HTTPError {
                return error.status.rawValue
            } catch {
                return 500
            }
        }
        guard status < 500 else { violated("\(method.rawValue) \(template) answered \(status)") }
    }
}
