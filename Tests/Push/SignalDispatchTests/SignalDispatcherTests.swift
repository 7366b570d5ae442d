import Durations
import Foundation
import MailboxStore
import Push
import ServiceMetrics
import TestSupport
import Testing

@testable import SignalDispatch

/// The dispatcher on a real SQLite store with the test clock, sending through a recording push service: what it
/// sends, and what each outcome does to the outbox and the device.
@Suite("Signal dispatcher")
struct SignalDispatcherTests {
    final class Fixture: Sendable {
        let directory: TemporaryDirectory
        let clock = ManualClock(start: Date(timeIntervalSince1970: 1_800_000_000))
        let store: MailboxStore
        let service: RecordingPushService
        let dispatcher: SignalDispatcher
        let accountID: Int64

        init(
            kind: PushSignal.Kind = .badge, throttles: Bool = false, backgroundBudget: Int = 3,
            instanceID: String = "dispatcher-test", outcomes: [PushOutcome] = [],
            pacing: SignalPacing = .standard, idleCheckInterval: Double = 0.05
        ) async throws {
            directory = try TemporaryDirectory(prefix: "dispatcher")
            var configuration = MailboxStore.Configuration()
            configuration.synchronous = .normal
            configuration.passwordParameters = .testing
            configuration.instanceID = instanceID
            configuration.pacing = pacing
            store = try MailboxStore(path: directory.path("mail.sqlite"), configuration: configuration, clock: clock)
            service = RecordingPushService(kind: kind, throttlesBackgroundSignals: throttles, clock: clock)
            service.script(outcomes)
            var dispatch = SignalDispatcher.Configuration()
            dispatch.backgroundBudget = backgroundBudget
            dispatch.idleCheckInterval = idleCheckInterval
            dispatcher = SignalDispatcher(
                store: store, router: PushRouter([service]), metrics: Metrics(), configuration: dispatch)
            accountID = try await store.createAccount(username: "alice", password: "password-alice").id
        }

        /// Registers a device (which queues a signal of the current state).
        func device(_ n: Int = 1) async throws -> DeviceRecord {
            try await store.registerDevice(
                address: .apns(
                    String(repeating: String(format: "%02x", n), count: 32), topic: "com.example.mail",
                    environment: .sandbox),
                accountID: accountID, sessionID: nil)
        }

        func deliver() async throws -> SyncState {
            try await store.deliver(NewMessage(to: "alice", from: "a@example.com", subject: "Hi", body: "Body")).state
        }

        func stop() async { await dispatcher.stop() }
    }

    @Test func aDeliveredSignalHoldsTheAliasTheTagOfTheStateAndTheBadgeAndEmptiesTheOutbox() async throws {
        let f = try await Fixture()
        let device = try await f.device()
        let state = try await f.deliver()
        f.dispatcher.start()
        #expect(try await eventually { try await f.store.outboxStats().depth == 0 })
        await f.stop()
        let sent = try #require(f.service.sent.last)
        let key = try #require(device.signalKey)
        #expect(sent.signal.alias.rawValue == device.alias)
        #expect(sent.signal.tag == key.tag(of: state.description))
        #expect(sent.signal.badge == 1)
        #expect(sent.address == device.address)
        #expect(f.service.sent.count == 1, "the registration and the delivery coalesced into one signal")
    }

    /// A change that must wait for the device's pacing token is sent when the token returns, not at the next idle
    /// check: its commit wakes the dispatcher, which then sleeps until the row is due.
    @Test func aPacedSignalGoesOutWhenItsTokenReturnsNotAtTheIdleCheck() async throws {
        let f = try await Fixture(pacing: SignalPacing(burst: 1, refillPerSecond: 1), idleCheckInterval: 3600)
        let watch = f.store.watchQueuedSignals { [dispatcher = f.dispatcher] in dispatcher.wake() }
        defer { watch.cancel() }
        _ = try await f.device()
        f.dispatcher.start()
        #expect(
            try await eventually {
                let depth = try await f.store.outboxStats().depth
                return f.service.sent.count == 1 && depth == 0
            })
        // The token is spent: the next change is due in a second (on the store's clock), and the outbox was empty
        // when the dispatcher went to sleep for its idle check. The change comes once it sleeps: a change made while
        // it is still awake would pass without testing the wake-up.
        #expect(await eventually { f.dispatcher.isAsleep })
        _ = try await f.deliver()
        f.clock.advance(by: 1)
        #expect(await eventually { f.service.sent.count == 2 }, "the paced signal waited for the idle check")
        await f.stop()
    }

    @Test func backgroundSignalsCarryNoBadge() async throws {
        let f = try await Fixture(kind: .background)
        _ = try await f.device()
        _ = try await f.deliver()
        f.dispatcher.start()
        #expect(await eventually { !f.service.sent.isEmpty })
        await f.stop()
        #expect(f.service.sent.allSatisfy { $0.signal.badge == nil && $0.signal.kind == .background })
    }

    @Test func aGoneRegistrationIsRemoved() async throws {
        let f = try await Fixture(outcomes: [.dropRegistration(reason: "UNREGISTERED", unregisteredAt: nil)])
        _ = try await f.device()
        f.dispatcher.start()
        #expect(try await eventually { try await f.store.devices(accountID: f.accountID).isEmpty })
        await f.stop()
        #expect(try await f.store.outboxStats().depth == 0)
    }

    @Test func aStaleReportThatTheDeviceIsGoneKeepsIt() async throws {
        let f = try await Fixture()
        let device = try await f.device()
        f.service.script([.dropRegistration(reason: "Unregistered", unregisteredAt: device.registeredAt - 10)])
        f.dispatcher.start()
        #expect(await eventually { !f.service.sent.isEmpty })
        #expect(try await eventually { try await f.store.outboxStats().depth == 0 })
        await f.stop()
        #expect(try await f.store.devices(accountID: f.accountID).count == 1, "registered after APNs's timestamp")
    }

    @Test func aTransientFailureIsRetriedAfterTheBackoffAndCountsAnAttempt() async throws {
        let f = try await Fixture(outcomes: [.retry(reason: "QUOTA_EXCEEDED", retryAfter: 60)])
        let device = try await f.device()
        f.dispatcher.start()
        #expect(try await eventually { try await f.store.signalAttempts(deviceID: device.id) == 1 })
        // A second short of Retry-After on the store's clock the retry is not due. Another device's two signals go
        // out meanwhile; the second is claimed after the first one's batch has finished, so any send the retry
        // would have made is recorded by then.
        f.clock.advance(by: 59)
        let other = try await f.device(2)
        func sends(to device: DeviceRecord) -> [RecordingPushService.Sent] {
            f.service.sent.filter { $0.address == device.address }
        }
        f.dispatcher.wake()
        #expect(await eventually { sends(to: other).count == 1 })
        _ = try await f.deliver()
        f.dispatcher.wake()
        #expect(await eventually { sends(to: other).count == 2 })
        #expect(sends(to: device).count == 1, "not before Retry-After")
        f.clock.advance(by: 2)
        f.dispatcher.wake()
        #expect(await eventually { sends(to: device).count == 2 })
        let times = sends(to: device).compactMap(\.at)
        #expect(times.count == 2 && times[1] - times[0] >= 60, "sent at \(times)")
        #expect(try await eventually { try await f.store.outboxStats().depth == 0 })
        await f.stop()
    }

    @Test func aDefectDropsTheSignalAndKeepsTheDevice() async throws {
        let f = try await Fixture(outcomes: [.defect(reason: "payloadGuard")])
        _ = try await f.device()
        f.dispatcher.start()
        #expect(try await eventually { try await f.store.outboxStats().depth == 0 })
        await f.stop()
        #expect(f.service.sent.count == 1)
        #expect(try await f.store.devices(accountID: f.accountID).count == 1)
    }

    @Test func aThrottledSignalIsDeferredWithoutCountingAFailure() async throws {
        let f = try await Fixture(kind: .background, throttles: true, backgroundBudget: 1)
        let device = try await f.device()
        f.dispatcher.start()
        #expect(await eventually { f.service.sent.count == 1 })
        _ = try await f.deliver()
        f.dispatcher.wake()
        #expect(
            try await eventually {
                try await f.store.nextSignalDue().map { $0 > f.clock.secondsSince1970 + 60 } == true
            })
        // The regression: a deferral used to count as a failed attempt and lengthen the next real backoff.
        #expect(try await f.store.signalAttempts(deviceID: device.id) == 0)
        #expect(f.service.sent.count == 1)
        f.clock.advance(by: 3601)
        f.dispatcher.wake()
        #expect(await eventually { f.service.sent.count == 2 })
        await f.stop()
    }

    @Test func aServiceThatDoesNotThrottleIsNotBudgeted() async throws {
        let f = try await Fixture(kind: .background, throttles: false, backgroundBudget: 1)
        _ = try await f.device()
        f.dispatcher.start()
        #expect(await eventually { f.service.sent.count == 1 })
        f.clock.advance(by: 1)
        _ = try await f.deliver()
        f.dispatcher.wake()
        #expect(await eventually { f.service.sent.count == 2 })
        await f.stop()
    }

    @Test func aStartingDispatcherReleasesTheLeasesOfItsPredecessor() async throws {
        let f = try await Fixture()
        _ = try await f.device()
        // A predecessor under the same name claimed the row and died before sending it.
        #expect(try await f.store.claimDueSignals().count == 1)
        #expect(try await f.store.claimDueSignals().isEmpty, "leased")
        f.dispatcher.start()
        #expect(await eventually { f.service.sent.count == 1 }, "sent at once, not after the lease ran out")
        await f.stop()
    }

    @Test func theBackoffGrowsWithJitterAndHonoursRetryAfter() {
        let backoff = Backoff(base: 0.5, maximum: 60, minimum: 0.05)
        #expect(backoff.delay(attempt: 1, retryAfter: nil, unit: 1) == 0.5)
        #expect(backoff.delay(attempt: 3, retryAfter: nil, unit: 1) == 2)
        #expect(backoff.delay(attempt: 30, retryAfter: nil, unit: 1) == 60)
        #expect(backoff.delay(attempt: 3, retryAfter: nil, unit: 0.5) == 1)
        #expect(backoff.delay(attempt: 1, retryAfter: nil, unit: 0) == 0.05)
        #expect(backoff.delay(attempt: 1, retryAfter: 120, unit: 1) == 120)
    }

    @Test func aRetryAfterThatIsNotAFiniteNumberIsIgnoredAndAHugeOneCappedAtADay() {
        let backoff = Backoff(base: 0.5, maximum: 60, minimum: 0.05)
        #expect(backoff.delay(attempt: 1, retryAfter: .nan, unit: 1) == 0.5)
        #expect(backoff.delay(attempt: 1, retryAfter: .infinity, unit: 1) == 0.5)
        #expect(backoff.delay(attempt: 1, retryAfter: -5, unit: 1) == 0.5)
        #expect(backoff.delay(attempt: 1, retryAfter: 1e12, unit: 1) == Backoff.longestRetryAfter)
    }
}
