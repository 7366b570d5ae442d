import Durations
import Foundation
import MailboxStore
import OpenSSLCrypto
import Push
import Testing

@Suite struct MailboxStoreOperationTests {
    @Test(arguments: StoreEngineKind.allCases) func accountsAreUniqueCaseInsensitiveAndValidated(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.store.createAccount(username: "Alice@Example.com", password: "password1")
        #expect(alice.username == "alice@example.com")
        await #expect(throws: MailboxStoreError.usernameTaken) {
            try await f.store.createAccount(username: "alice@example.COM", password: "password2")
        }
        await #expect(throws: MailboxStoreError.invalidArgument("username")) {
            try await f.store.createAccount(username: "  ", password: "password2")
        }
        await #expect(throws: MailboxStoreError.self) {
            try await f.store.createAccount(username: "bob", password: "short")
        }
        #expect(try await f.store.accounts().map(\.username) == ["alice@example.com"])
        #expect(try await f.store.mailboxes(accountID: alice.id).map(\.role) == [.inbox, .archive, .trash])
    }

    @Test(arguments: StoreEngineKind.allCases) func authenticationChecksThePassword(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        #expect(try await f.store.authenticate(username: "alice", password: "password-alice") == alice.id)
        #expect(try await f.store.authenticate(username: "ALICE", password: "password-alice") == alice.id)
        #expect(try await f.store.authenticate(username: "alice", password: "wrong-password") == nil)
        #expect(try await f.store.authenticate(username: "nobody", password: "password-alice") == nil)
    }

    @Test(arguments: StoreEngineKind.allCases) func sessionsAreFoundByTokenHashAndRevocable(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        let token = SecureRandom.bytes(32)
        let session = try await f.store.createSession(
            accountID: alice.id, tokenHash: SHA256.hash(token), deviceName: "phone")
        #expect(try await f.store.session(tokenHash: SHA256.hash(token)) == session)
        #expect(try await f.store.session(tokenHash: SHA256.hash(SecureRandom.bytes(32))) == nil)
        try await f.store.registerDevice(
            address: .apns(StoreFixture.token(1), topic: "com.example.mail", environment: .sandbox),
            accountID: alice.id,
            sessionID: session.id)
        #expect(try await f.store.revokeSession(id: session.id, accountID: alice.id))
        #expect(try await f.store.session(tokenHash: SHA256.hash(token)) == nil)
        #expect(try await f.store.devices(accountID: alice.id).isEmpty, "a revoked session's devices are removed")
        #expect(try await f.store.revokeSession(id: session.id, accountID: alice.id) == false)
    }

    @Test(arguments: StoreEngineKind.allCases) func deliveryStoresTheMessageAndBumpsTheState(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        let before = try await f.store.currentState(accountID: alice.id)
        let receipt = try await f.deliver(to: "Alice", subject: "Lunch?", body: "Line one\nLine two")
        #expect(receipt.state.modseq == before.modseq + 1)
        let message = try #require(try await f.store.message(id: receipt.id, accountID: alice.id))
        #expect(message.subject == "Lunch?")
        #expect(message.preview == "Line one Line two")
        #expect(message.mailbox == .inbox)
        #expect(!message.seen)
        #expect(message.size == 17)
        #expect(try await f.store.unreadCount(accountID: alice.id) == 1)
        await #expect(throws: MailboxStoreError.notFound) { try await f.deliver(to: "nobody") }
    }

    @Test(arguments: StoreEngineKind.allCases) func flagsMovesAndDestroyEachBumpTheState(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        let id = try await f.deliver(to: "alice").id
        let seen = try await f.store.updateMessage(id: id, accountID: alice.id, seen: true)
        #expect(seen.seen && seen.modseq == 2)
        #expect(try await f.store.unreadCount(accountID: alice.id) == 0)
        // No change, no new state.
        #expect(try await f.store.updateMessage(id: id, accountID: alice.id, seen: true).modseq == 2)
        let moved = try await f.store.updateMessage(id: id, accountID: alice.id, flagged: true, mailbox: .archive)
        #expect(moved.mailbox == .archive && moved.flagged && moved.modseq == 3)
        #expect(try await f.store.mailboxes(accountID: alice.id).first { $0.role == .archive }?.total == 1)
        let state = try await f.store.destroyMessage(id: id, accountID: alice.id)
        #expect(state.modseq == 4)
        #expect(try await f.store.message(id: id, accountID: alice.id) == nil)
        await #expect(throws: MailboxStoreError.notFound) {
            try await f.store.destroyMessage(id: id, accountID: alice.id)
        }
        await #expect(throws: MailboxStoreError.notFound) {
            try await f.store.updateMessage(id: "missing", accountID: alice.id, seen: true)
        }
    }

    @Test(arguments: StoreEngineKind.allCases) func pagedListingReturnsItsState(engine: StoreEngineKind) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        for i in 0..<25 { _ = try await f.deliver(to: "alice", subject: "m\(i)") }
        var cursor: String?
        var subjects: [String] = []
        repeat {
            let page = try await f.store.listMessages(accountID: alice.id, cursor: cursor, limit: 10)
            #expect(page.state.modseq == 25)
            subjects += page.messages.map(\.subject)
            cursor = page.nextCursor
        } while cursor != nil
        #expect(subjects == (0..<25).map { "m\($0)" })
        await #expect(throws: MailboxStoreError.invalidArgument("cursor")) {
            try await f.store.listMessages(accountID: alice.id, cursor: "x")
        }
    }

    @Test(arguments: StoreEngineKind.allCases) func devicesRegisterUpdateMoveAndDelete(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        let bob = try await f.account("bob")
        let token = StoreFixture.token(7)
        let first = try await f.store.registerDevice(
            address: .apns(token, topic: "com.example.mail", environment: .sandbox), accountID: alice.id, sessionID: nil
        )
        #expect(first.alias.count == 16)
        #expect(!first.alias.contains("alice"))
        let again = try await f.store.registerDevice(
            address: .apns(token, topic: "com.example.mail", environment: .production), accountID: alice.id,
            sessionID: nil)
        #expect(again.id == first.id && again.alias == first.alias && again.address.environment == .production)
        // The same token registered by another account is a device of its own there: alice's stays, and is still
        // signalled (whoever learns a token cannot take it over and silence its owner).
        _ = try await f.store.claimDueSignals()
        let other = try await f.store.registerDevice(
            address: .apns(token, topic: "com.example.mail", environment: .production), accountID: bob.id,
            sessionID: nil)
        #expect(other.accountID == bob.id && other.id != first.id && other.alias != first.alias)
        #expect(try await f.store.devices(accountID: alice.id).map(\.id) == [first.id])
        f.advance(60)
        _ = try await f.deliver(to: "alice")
        let claimed = try await f.store.claimDueSignals()
        #expect(claimed.map(\.deviceID).contains(first.id), "alice's registration is signalled")
        #expect(try await f.store.deleteDevice(handle: token, accountID: bob.id))
        #expect(try await f.store.devices(accountID: alice.id).map(\.id) == [first.id], "bob's removal is his own")
        #expect(try await f.store.deleteDevice(handle: token, accountID: alice.id))
        await #expect(throws: MailboxStoreError.invalidArgument("device address")) {
            try await f.store.registerDevice(
                address: .apns("has space", topic: "t", environment: .sandbox), accountID: alice.id, sessionID: nil)
        }
        await #expect(throws: MailboxStoreError.invalidArgument("app")) {
            try await f.store.registerDevice(
                address: .apns(StoreFixture.token(8), topic: "has space", environment: .sandbox), accountID: alice.id,
                sessionID: nil)
        }
    }

    @Test(arguments: StoreEngineKind.allCases) func unregisteredDeviceIsDeletedOnlyByANewerTimestamp(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        let device = try await f.store.registerDevice(
            address: .apns(StoreFixture.token(3), topic: "com.example.mail", environment: .sandbox),
            accountID: alice.id,
            sessionID: nil)
        #expect(
            try await f.store.deleteUnregisteredDevice(
                id: device.id, registeredAt: device.registeredAt, unregisteredAt: device.registeredAt - 5) == false)
        #expect(
            try await f.store.deleteUnregisteredDevice(
                id: device.id, registeredAt: device.registeredAt, unregisteredAt: device.registeredAt + 5))
        #expect(try await f.store.devices(accountID: alice.id).isEmpty)
    }

    @Test(arguments: StoreEngineKind.allCases) func aDeviceRegisteredAgainDuringASendSurvivesTheReportItIsGone(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        let token = "fMx7:APA91b" + String(repeating: "AbC_-", count: 20)
        let address = PushAddress(service: .fcm, token: token, app: "com.example.mail")
        let sentTo = try await f.store.registerDevice(address: address, accountID: alice.id, sessionID: nil)
        f.advance(1)
        let again = try await f.store.registerDevice(address: address, accountID: alice.id, sessionID: nil)
        // FCM answers UNREGISTERED (no timestamp) for the send made to the first registration: the second survives.
        #expect(
            try await f.store.deleteUnregisteredDevice(
                id: sentTo.id, registeredAt: sentTo.registeredAt, unregisteredAt: nil) == false)
        #expect(try await f.store.devices(accountID: alice.id).map(\.address) == [address], "the token keeps its case")
        #expect(
            try await f.store.deleteUnregisteredDevice(
                id: again.id, registeredAt: again.registeredAt, unregisteredAt: nil))
        #expect(try await f.store.devices(accountID: alice.id).isEmpty)
    }

    @Test(arguments: StoreEngineKind.allCases) func aWebPushSubscriptionsKeysAreKeptWithItAndRefreshed(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        let endpoint = "https://updates.push.example/wpush/v2/gAAAAABk-Case_Kept"
        let keys =
            "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4.BTBZMqHH6r4Tts7J_aSIgg"
        let address = PushAddress(service: .webpush, token: endpoint, app: "", keys: keys)
        let device = try await f.store.registerDevice(address: address, accountID: alice.id, sessionID: nil)
        #expect(device.address == address)
        let claimed = try await f.store.claimDueSignals()
        #expect(claimed.map(\.address) == [address], "the outbox hands the sender the keys")
        // The browser subscribed again with new keys for the same endpoint: the device keeps its id, with the new keys.
        var renewed = address
        renewed.keys =
            "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8.DGv6ra1nlYgDCS1FRnbzlw"
        let again = try await f.store.registerDevice(address: renewed, accountID: alice.id, sessionID: nil)
        #expect(again.id == device.id && again.handle == device.handle)
        #expect(try await f.store.devices(accountID: alice.id).map(\.address) == [renewed])
        // Keys are the service's text, printable ASCII of bounded length.
        renewed.keys = String(repeating: "k", count: 256)
        await #expect(throws: MailboxStoreError.invalidArgument("keys")) {
            try await f.store.registerDevice(address: renewed, accountID: alice.id, sessionID: nil)
        }
    }

    @Test(arguments: StoreEngineKind.allCases) func anAccountRegistersAtMostItsCapOfDevices(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine, maximumDevicesPerAccount: 2)
        let alice = try await f.account("alice")
        let bob = try await f.account("bob")
        let addresses = (1...3).map {
            PushAddress.apns(StoreFixture.token($0), topic: "com.example.mail", environment: .sandbox)
        }
        for address in addresses.prefix(2) {
            try await f.store.registerDevice(address: address, accountID: alice.id, sessionID: nil)
        }
        await #expect(throws: MailboxStoreError.tooManyDevices) {
            try await f.store.registerDevice(address: addresses[2], accountID: alice.id, sessionID: nil)
        }
        // A refresh is not one more; another account has a cap of its own, and a token alice holds counts there
        // too when bob registers it (it is his registration as well as hers).
        try await f.store.registerDevice(address: addresses[0], accountID: alice.id, sessionID: nil)
        try await f.store.registerDevice(address: addresses[2], accountID: bob.id, sessionID: nil)
        try await f.store.registerDevice(address: addresses[0], accountID: bob.id, sessionID: nil)
        await #expect(throws: MailboxStoreError.tooManyDevices) {
            try await f.store.registerDevice(address: addresses[1], accountID: bob.id, sessionID: nil)
        }
        #expect(try await f.store.devices(accountID: alice.id).count == 2)
        #expect(try await f.store.devices(accountID: bob.id).count == 2)
    }

    @Test(arguments: StoreEngineKind.allCases) func everyRegistrationGetsAFreshSignalKeyAndAnID(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        let address = PushAddress.apns(StoreFixture.token(4), topic: "com.example.mail", environment: .sandbox)
        let first = try await f.store.registerDevice(address: address, accountID: alice.id, sessionID: nil)
        let second = try await f.store.registerDevice(address: address, accountID: alice.id, sessionID: nil)
        let firstKey = try #require(first.signalKey)
        let secondKey = try #require(second.signalKey)
        #expect(firstKey != secondKey && firstKey.bytes.count == 32)
        #expect(first.handle != nil && first.handle == second.handle, "the device keeps its id")
        // The outbox row carries the newest key: the signal's tag is under the key the device holds now.
        let item = try #require(try await f.store.claimDueSignals().first)
        #expect(item.signalKey == secondKey)
        #expect(try await f.store.deleteDevice(handle: try #require(first.handle), accountID: alice.id))
    }

    @Test(arguments: StoreEngineKind.allCases) func instancesReportThemselvesAndTheSilentOnesDropOut(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let start = f.clock.secondsSince1970
        try await f.store.reportInstance(
            InstanceReport(id: "a", startedAt: start, seenAt: start, changes: 1, signalsSent: 2, signalsFailed: 0))
        try await f.store.reportInstance(
            InstanceReport(id: "b", startedAt: start, seenAt: start, changes: 0, signalsSent: 0, signalsFailed: 0))
        f.advance(30)
        try await f.store.reportInstance(
            InstanceReport(
                id: "a", startedAt: start, seenAt: f.clock.secondsSince1970, changes: 5, signalsSent: 9,
                signalsFailed: 1))
        let seen = try await f.store.instances(seenWithin: 60)
        #expect(seen.map(\.id) == ["a", "b"])
        #expect(seen.first?.changes == 5 && seen.first?.signalsSent == 9 && seen.first?.signalsFailed == 1)
        #expect(try await f.store.instances(seenWithin: 20).map(\.id) == ["a"], "b has been silent for 30 s")
    }
}
