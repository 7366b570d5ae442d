import Foundation
import Locking
import MailboxStore
import TestSupport

/// A store in its own temporary file, with a clock the test moves.
final class StoreFixture: Sendable {
    let directory: TemporaryDirectory
    let store: MailboxStore
    let clock: TestClock

    init(
        synchronous: Bool = false, retention: TimeInterval = 30 * 86_400, pacing: SignalPacing = .standard,
        directory: TemporaryDirectory? = nil
    ) throws {
        self.directory = try directory ?? TemporaryDirectory(prefix: "mailboxstore")
        let directory = self.directory
        let clock = TestClock()
        self.clock = clock
        var configuration = MailboxStore.Configuration()
        configuration.synchronous = synchronous ? .full : .normal
        configuration.passwordParameters = .testing
        configuration.tombstoneRetention = retention
        configuration.pacing = pacing
        store = try MailboxStore(path: directory.path("mail.sqlite"), configuration: configuration) {
            clock.now
        }
    }

    func advance(_ seconds: Double) { clock.advance(seconds) }

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

/// A clock the test moves by hand.
final class TestClock: Sendable {
    private let value = LockedValue<Double>(1_800_000_000)
    var now: Double { value.withLock { $0 } }
    func advance(_ seconds: Double) { value.withLock { $0 += seconds } }
}
