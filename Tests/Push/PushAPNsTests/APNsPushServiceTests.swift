import APNsSimulator
import Foundation
import MailboxStore
import OpenSSLCrypto
import Push
import TestSupport
import Testing

@testable import PushAPNs

/// The sender against an in-process apns-sim with a production and a sandbox listener (h2c) and two signing
/// keys: each outbox row goes to its device's environment with its app's topic, kind and key.
@Suite("APNs signal sender: apps and environments")
struct APNsPushServiceTests {
    static let team = "TEAM123456"

    /// The simulator, two keys, a store with one account, and the two-app configuration.
    final class Fixture: Sendable {
        let directory: TemporaryDirectory
        let simulator: APNsSimulatorServer
        let store: MailboxStore
        let configuration: APNsConfiguration
        let accountID: Int64

        init() async throws {
            directory = try TemporaryDirectory(prefix: "apns-sender")
            let keyA = try P256PrivateKey()
            let keyB = try P256PrivateKey()
            try keyA.pemRepresentation.write(toFile: directory.path("a.p8"), atomically: true, encoding: .utf8)
            try keyB.pemRepresentation.write(toFile: directory.path("b.p8"), atomically: true, encoding: .utf8)
            simulator = APNsSimulatorServer(
                configuration: APNsSimulatorConfiguration(
                    providerPort: 0, sandboxPort: 0, devicePort: 0,
                    gateway: APNsGatewayConfiguration(providerKeys: [
                        ProviderKey(keyID: "KEYAAAAAAA", teamID: team, publicKey: try keyA.publicKey),
                        ProviderKey(keyID: "KEYBBBBBBB", teamID: team, publicKey: try keyB.publicKey),
                    ])))
            try simulator.start()
            configuration = try APNsConfiguration(
                production: "http://127.0.0.1:\(simulator.providerPort)",
                sandbox: "http://127.0.0.1:\(simulator.sandboxPort)",
                apps: [
                    .init(
                        topic: "com.example.mail", keyFile: directory.path("a.p8"), keyID: "KEYAAAAAAA", teamID: team),
                    .init(
                        topic: "com.example.notes", keyFile: directory.path("b.p8"), keyID: "KEYBBBBBBB", teamID: team,
                        signalKind: .background),
                ])
            var storeConfiguration = MailboxStore.Configuration()
            storeConfiguration.synchronous = .normal
            storeConfiguration.passwordParameters = .testing
            store = try MailboxStore(path: directory.path("mail.sqlite"), configuration: storeConfiguration)
            accountID = try await store.createAccount(username: "alice", password: "password-alice").id
        }

        /// A device registered at the simulator in `simEnvironment` and in the store as `environment`.
        func device(
            topic: String, environment: PushEnvironment, simEnvironment: APNsEnvironment? = nil
        ) async throws -> String {
            let token = simulator.gateway.registerDevice(
                topic: topic, environment: simEnvironment ?? (environment == .sandbox ? .sandbox : .production))
            try await store.registerDevice(
                address: .apns(token, topic: topic, environment: environment), accountID: accountID, sessionID: nil)
            return token
        }

        /// Delivers one message and claims the outbox rows it queued.
        func deliverAndClaim() async throws -> [OutboxItem] {
            _ = try await store.deliver(NewMessage(to: "alice", from: "a@example.com", subject: "Hi", body: "Body"))
            return try await store.claimDueSignals()
        }

        func stop() async { await simulator.shutdown() }
    }

    /// Sends `item`'s signal as the dispatcher builds it: the alias, the tag of the state now under the device's
    /// key, the unread count for a badge app.
    static func send(_ sender: APNsPushService, _ item: OutboxItem) async throws -> PushOutcome {
        let kind = sender.signalKind(for: item.address) ?? .badge
        let signal = try PushSignal(
            alias: try DeviceAlias(item.alias), tag: item.signalKey?.tag(of: item.state.description),
            badge: kind == .badge ? item.unread : nil)
        return await sender.send(signal, to: item.address)
    }

    @Test func eachSignalGoesToItsEnvironmentWithItsAppsTopicKindAndKey() async throws {
        let f = try await Fixture()
        let sender = try APNsPushService(configuration: f.configuration)
        let mailProduction = try await f.device(topic: "com.example.mail", environment: .production)
        let mailSandbox = try await f.device(topic: "com.example.mail", environment: .sandbox)
        let notesSandbox = try await f.device(topic: "com.example.notes", environment: .sandbox)
        let items = try await f.deliverAndClaim()
        var outcomes: [String: PushOutcome] = [:]
        for item in items { outcomes[item.address.token] = try await Self.send(sender, item) }
        let log = f.simulator.gateway.logEntries()
        let open = sender.openConnections
        let closed = sender.closeIdleConnections(now: .now + .seconds(3600))
        let openAfterIdle = sender.openConnections
        let again = try await Self.send(sender, try #require(items.first))
        let opened = sender.connectionsOpened
        sender.shutdown()
        await f.stop()

        #expect(items.count == 3)
        #expect(outcomes.values.allSatisfy { $0 == .delivered }, "\(outcomes)")
        func entry(_ token: String) -> APNsLogEntry? { log.first { $0.deviceToken == token } }
        #expect(entry(mailProduction)?.environment == .production)
        #expect(entry(mailSandbox)?.environment == .sandbox)
        #expect(entry(notesSandbox)?.environment == .sandbox)
        #expect(entry(mailProduction)?.headers["apns-topic"] == "com.example.mail")
        #expect(entry(notesSandbox)?.headers["apns-topic"] == "com.example.notes")
        #expect(entry(mailSandbox)?.headers["apns-push-type"] == "alert")
        #expect(entry(notesSandbox)?.headers["apns-push-type"] == "background")
        #expect(entry(notesSandbox)?.headers["apns-priority"] == "5")
        #expect(entry(notesSandbox)?.payload.contains("badge") == false, "background signals carry no badge")
        #expect(
            sender.signalKind(for: try #require(items.first { $0.address.token == notesSandbox }).address)
                == .background)
        #expect(sender.signalKind(for: try #require(items.first { $0.address.token == mailSandbox }).address) == .badge)
        // One connection per (endpoint, key): production/A, sandbox/A, sandbox/B; closed when idle, reopened on use.
        #expect(open == 3)
        #expect(closed == 3 && openAfterIdle == 0)
        #expect(again == .delivered)
        #expect(opened == 4)
        #expect(f.simulator.gateway.metrics.responses.keys.allSatisfy { $0.status == 200 })
    }

    @Test func onlyConnectionsIdleLongEnoughAndWithNothingInFlightAreClosed() async throws {
        let f = try await Fixture()
        let sender = try APNsPushService(configuration: f.configuration, idleTimeout: .seconds(60))
        _ = try await f.device(topic: "com.example.mail", environment: .production)
        let item = try #require(try await f.deliverAndClaim().first)
        _ = try await Self.send(sender, item)
        let recent = sender.closeIdleConnections(now: .now + .seconds(30))
        // Hold the next answer back: the connection has a send in flight however long ago it was first used.
        f.simulator.gateway.setFaults(APNsFaults(SimulatorFaults(latency: .seconds(1))))
        let inFlight = Task { try await Self.send(sender, item) }
        // The gateway has the second send (it logs a request before holding its answer back).
        #expect(await eventually { f.simulator.gateway.logEntries().count == 2 })
        let busy = sender.closeIdleConnections(now: .now + .seconds(3600))
        let outcome = try await inFlight.value
        let stale = sender.closeIdleConnections(now: .now + .seconds(61))
        sender.shutdown()
        await f.stop()
        #expect(recent == 0, "used 30 s ago: kept")
        #expect(busy == 0, "a send in flight keeps its connection")
        #expect(outcome == .delivered)
        #expect(stale == 1)
    }

    @Test func aTokenSentToTheWrongEnvironmentDropsTheRegistration() async throws {
        let f = try await Fixture()
        let sender = try APNsPushService(configuration: f.configuration)
        // A production build's token, registered as sandbox: the sandbox gateway has never seen it.
        let token = try await f.device(topic: "com.example.mail", environment: .sandbox, simEnvironment: .production)
        let items = try await f.deliverAndClaim()
        let outcome = try await Self.send(sender, try #require(items.first))
        let entry = f.simulator.gateway.logEntries().first { $0.deviceToken == token }
        sender.shutdown()
        await f.stop()
        #expect(outcome == .dropRegistration(reason: "BadDeviceToken", unregisteredAt: nil))
        #expect(entry?.environment == .sandbox && entry?.reason == "BadDeviceToken")
    }

    @Test func aRowForATopicNoAppServesIsADefectAndIsNotSent() async throws {
        let f = try await Fixture()
        let sender = try APNsPushService(configuration: f.configuration)
        _ = try await f.device(topic: "com.example.retired", environment: .production)
        let items = try await f.deliverAndClaim()
        let outcome = try await Self.send(sender, try #require(items.first))
        let sent = f.simulator.gateway.logEntries().count
        sender.shutdown()
        await f.stop()
        #expect(outcome == .defect(reason: "unknownTopic"))
        #expect(sent == 0)
        #expect(sender.serves(topic: "com.example.mail") && sender.serves(topic: "com.example.notes"))
        #expect(!sender.serves(topic: "com.example.retired"))
        #expect(throws: RegistrationError.self) {
            try sender.address(
                for: DeviceRegistration(
                    service: .apns,
                    fields: [
                        "token": String(repeating: "ab", count: 32), "topic": "com.example.retired",
                        "environment": "sandbox",
                    ]))
        }
    }

    @Test func eachKeyKeepsItsTokenAcrossRestarts() async throws {
        let f = try await Fixture()
        let cache = f.directory.path("tokens")
        try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
        _ = try await f.device(topic: "com.example.mail", environment: .production)
        _ = try await f.device(topic: "com.example.notes", environment: .sandbox)
        let items = try await f.deliverAndClaim()
        let first = try APNsPushService(configuration: f.configuration, tokenCacheDirectory: cache)
        for item in items { _ = try await Self.send(first, item) }
        first.shutdown()
        let saved = ["KEYAAAAAAA", "KEYBBBBBBB"].map {
            APNsPushService.readToken(APNsPushService.tokenFile(cache, keyID: $0))?.value
        }
        let second = try APNsPushService(configuration: f.configuration, tokenCacheDirectory: cache)
        for item in items { _ = try await Self.send(second, item) }
        second.shutdown()
        let authorizations = Set(f.simulator.gateway.logEntries().compactMap { $0.headers["authorization"] })
        let refused = f.simulator.gateway.metrics.responses.keys.filter { $0.status != 200 }
        await f.stop()
        #expect(saved.allSatisfy { $0 != nil } && Set(saved).count == 2, "one token file per key")
        #expect(refused.isEmpty, "no TooManyProviderTokenUpdates after the restart: \(refused)")
        #expect(authorizations == ["[redacted]"])
    }
}
