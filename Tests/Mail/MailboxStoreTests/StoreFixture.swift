import Durations
import Foundation
import Locking
import MailboxStore
import TestSupport
import Testing

/// The engines the store's conformance suite runs on: every store test takes one as its argument.
enum StoreEngineKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }
}

/// A store in its own temporary SQLite file or its own database on the test process's PostgreSQL server, with a
/// clock the test moves.
final class StoreFixture: Sendable {
    let directory: TemporaryDirectory
    let database: StoreDatabase
    let store: MailboxStore
    let clock: ManualClock

    /// A new store on `engine`; or, given `reopening`, the same data and clock opened again (as a restarted process,
    /// or another process sharing the database, would), named `instanceID` in the leases it takes.
    init(
        engine: StoreEngineKind = .sqlite, synchronous: Bool = false, retention: TimeInterval = 30 * 86_400,
        pacing: SignalPacing = .standard, reopening previous: StoreFixture? = nil, database given: StoreDatabase? = nil,
        instanceID: String = "test", maximumDevicesPerAccount: Int = 100,
        adjust: (inout MailboxStore.Configuration) -> Void = { _ in }
    ) throws {
        directory = try previous?.directory ?? TemporaryDirectory(prefix: "mailboxstore")
        if let previous {
            database = previous.database
        } else if let given {
            database = given
        } else {
            switch engine {
            case .sqlite: database = .sqlite(path: directory.path("mail.sqlite"))
            case .postgres: database = .postgres(url: try PostgresServer.shared().makeDatabase())
            }
        }
        let clock = previous?.clock ?? ManualClock(start: Date(timeIntervalSince1970: 1_800_000_000))
        self.clock = clock
        var configuration = MailboxStore.Configuration()
        configuration.synchronous = synchronous ? .full : .normal
        configuration.passwordParameters = .testing
        configuration.tombstoneRetention = retention
        configuration.pacing = pacing
        configuration.postgresConnections = 4
        configuration.instanceID = instanceID
        configuration.maximumDevicesPerAccount = maximumDevicesPerAccount
        adjust(&configuration)
        store = try MailboxStore(database: database, configuration: configuration, clock: clock)
    }

    func advance(_ seconds: Double) { clock.advance(by: seconds) }

    func account(_ name: String) async throws -> Account {
        try await store.createAccount(username: name, password: "password-\(name)")
    }

    func deliver(
        to name: String, subject: String = "Hello", body: String = "Body text"
    ) async throws
        -> DeliveryReceipt
    {
        try await store.deliver(NewMessage(to: name, from: "sender@example.com", subject: subject, body: body))
    }

    static func token(_ n: Int) -> String { String(repeating: String(format: "%02x", n % 256), count: 32) }
}
