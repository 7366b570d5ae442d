import APNsSimulator
import Durations
import Foundation
import Locking
import MailboxService
import MailboxStore
import OpenSSLCrypto
import PushAPNs
import SQLiteKit
import SignalDispatch
import TestSupport

/// mailboxd in process (its own SQLite store, port 0, plain HTTP or TLS) with APNs going to an in-process apns-sim,
/// and one account, `alice` with the password `secret`. The test reaches into the store for what a client cannot
/// do: deliver, let time pass, discard tombstones, end sessions, hold the database's write lock.
final class InProcessMailboxd: Sendable {
    static let deliveryToken = "delivery-secret"
    static let username = "alice"
    static let password = "alice-secret"
    /// The app the APNs service signals (`mail-client run`'s default topic).
    static let topic = "com.example.signalfetch"

    /// One request as the API's access log tells it.
    struct Request: Sendable {
        var method: String
        var path: String
        var status: Int
    }

    /// The service's clock: the system's, plus whatever time the test let pass.
    final class Clock: WallClock {
        private let skipped = LockedValue<Double>(0)

        /// The system's time plus the time skipped.
        func now() -> Date { Date().addingTimeInterval(skipped.withLock { $0 }) }

        /// Moves the clock forward.
        func skip(_ seconds: Double) { skipped.withLock { $0 += seconds } }
    }

    let directory: TemporaryDirectory
    let clock = Clock()
    let store: MailboxStore
    let simulator: APNsSimulatorServer
    let accountID: Int64
    /// The scheme and address the API is reached at, e.g. `http://127.0.0.1:40123`.
    let baseURL: String
    private let configuration: ServiceConfiguration
    private let router: PushRouter
    private let running: LockedValue<MailboxService?>
    private let log: LockedValue<[Request]>

    /// Starts apns-sim and mailboxd; with `tls`, the API serves HTTPS with that certificate and key.
    init(tls: (certificatePEM: String, keyPEM: String)? = nil) async throws {
        directory = try TemporaryDirectory(prefix: "mailsync-mailboxd")
        let key = try P256PrivateKey()
        try key.pemRepresentation.write(toFile: directory.path("apns.p8"), atomically: true, encoding: .utf8)
        simulator = APNsSimulatorServer(
            configuration: APNsSimulatorConfiguration(
                providerPort: 0, devicePort: 0, heartbeat: .seconds(1),
                gateway: APNsGatewayConfiguration(providerKeys: [
                    ProviderKey(keyID: "KEY0000001", teamID: "TEAM000001", publicKey: try key.publicKey)
                ])))
        try simulator.start()
        let provider = "http://127.0.0.1:\(simulator.providerPort)"
        let apns = try APNsPushService(
            configuration: try APNsConfiguration(
                production: provider, sandbox: provider,
                apps: [
                    .init(
                        topic: Self.topic, keyFile: directory.path("apns.p8"), keyID: "KEY0000001", teamID: "TEAM000001"
                    )
                ]))
        router = PushRouter([apns])

        var configuration = ServiceConfiguration(
            dataDirectory: directory.path("data"), deliveryToken: Self.deliveryToken)
        configuration.port = 0
        configuration.metricsHost = "127.0.0.1"
        configuration.metricsPort = 0
        configuration.store.passwordParameters = .testing
        configuration.store.synchronous = .normal
        // Tombstones are discarded whenever the test asks (``discardTombstones()``), not after 30 days.
        configuration.store.tombstoneRetention = 0
        if let tls {
            try tls.certificatePEM.write(toFile: directory.path("server.pem"), atomically: true, encoding: .utf8)
            try tls.keyPEM.write(toFile: directory.path("server.key"), atomically: true, encoding: .utf8)
            configuration.tlsCertificatePath = directory.path("server.pem")
            configuration.tlsKeyPath = directory.path("server.key")
        }
        let log = LockedValue<[Request]>([])
        configuration.accessLog = { line in
            // `remote method path status duration`
            let fields = line.split(separator: " ")
            guard fields.count >= 4, let status = Int(fields[3]) else { return }
            log.withLock { $0.append(Request(method: String(fields[1]), path: String(fields[2]), status: status)) }
        }
        self.log = log
        try FileManager.default.createDirectory(atPath: configuration.dataDirectory, withIntermediateDirectories: true)
        store = try MailboxStore(
            database: configuration.storeDatabase, configuration: configuration.store, clock: clock)
        accountID = try await store.createAccount(username: Self.username, password: Self.password).id
        let service = try MailboxService(configuration: configuration, router: router, store: store)
        // Restarts bind the same port, so clients find the service where it was.
        configuration.port = service.port
        self.configuration = configuration
        running = LockedValue(service)
        baseURL = "\(tls == nil ? "http" : "https")://127.0.0.1:\(service.port)"
    }

    deinit {
        let (service, simulator, router) = (running.withLock { $0 }, simulator, router)
        Task {
            await service?.shutdown()
            router.shutdown()
            await simulator.shutdown()
        }
    }

    /// apns-sim's device side (`mail-client run --sim`).
    var simURL: String { "http://127.0.0.1:\(simulator.devicePort)" }

    /// The service's metrics listener: mailboxd's, with no API routes.
    var metricsURL: String { "http://127.0.0.1:\(running.withLock { $0?.metricsPort } ?? 0)" }

    /// Every request the API has answered, oldest first.
    var requests: [Request] { log.withLock { $0 } }

    /// Stops the service: its listener closes and every event stream ends.
    func stop() async {
        let service = running.withLock { service in
            defer { service = nil }
            return service
        }
        await service?.shutdown()
    }

    /// Stops the service and starts it again on the same port and store.
    func restart() async throws {
        await stop()
        let service = try MailboxService(configuration: configuration, router: router, store: store)
        running.withLock { $0 = service }
    }

    /// Delivers a message to alice as `POST /v1/deliveries` does.
    @discardableResult
    func deliver(subject: String = "s", body: String = "b") async throws -> DeliveryReceipt {
        try await store.deliver(
            NewMessage(to: Self.username, from: "bob@example.com", subject: subject, body: body))
    }

    /// A message comes and goes, time passes, and the tombstones are discarded: a state from before is now older
    /// than the account's horizon.
    func discardTombstones() async throws {
        let receipt = try await deliver(subject: "gone")
        _ = try await store.destroyMessage(id: receipt.id, accountID: accountID)
        clock.skip(1)
        try await store.purgeTombstones()
    }

    /// Revokes the session `accessToken` names.
    func revokeSession(accessToken: String) async throws {
        let session = try await store.session(tokenHash: SHA256.hash(accessToken))
        guard let session else { throw TestServerError("no live session for that token") }
        try await store.revokeSession(id: session.id, accountID: session.accountID)
    }

    /// Holds the database's write lock from another connection while `body` runs. A request that must write waits
    /// for it (SQLite's 5 s busy timeout) and is answered 503 `storageUnavailable`. Two hours pass first, so the
    /// next request's session check writes the session's last use.
    @discardableResult
    func withWritesHeld<T>(_ body: () async throws -> T) async throws -> T {
        clock.skip(7200)
        let connection = try Database(path: configuration.storeDatabase.sqlitePath)
        try connection.execute("BEGIN IMMEDIATE")
        defer { try? connection.execute("ROLLBACK") }
        return try await body()
    }

    /// Sets the messages table aside from another connection while `body` runs: reading messages fails inside the
    /// database, which the API answers 500.
    @discardableResult
    func withMessagesTableAside<T>(_ body: () async throws -> T) async throws -> T {
        let connection = try Database(path: configuration.storeDatabase.sqlitePath)
        try connection.execute("ALTER TABLE messages RENAME TO messages_aside")
        defer { try? connection.execute("ALTER TABLE messages_aside RENAME TO messages") }
        return try await body()
    }

    /// Waits until the access log holds a request matching `predicate`.
    func waitForRequest(_ predicate: (Request) -> Bool) async -> Bool {
        await eventually { requests.contains(where: predicate) }
    }

    /// The server's mailbox: the state, the message ids (sorted) and the APNs tokens of the registered devices.
    func mailbox() async throws -> (state: String, messageIDs: [String], devices: [String]) {
        let page = try await store.listMessages(accountID: accountID, limit: 1000)
        let devices = try await store.devices(accountID: accountID)
        return (
            try await store.currentState(accountID: accountID).description, page.messages.map(\.id).sorted(),
            devices.map(\.address.token).sorted()
        )
    }
}

extension StoreDatabase {
    /// The SQLite file (the in-process service always uses one).
    fileprivate var sqlitePath: String {
        if case .sqlite(let path) = self { return path }
        return ""
    }
}

struct TestServerError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
