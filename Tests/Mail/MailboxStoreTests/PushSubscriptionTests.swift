import Durations
import MailboxStore
import Testing

/// JMAP push subscriptions in the store, on both engines: made unverified with a fresh id and code, verified,
/// changed, capped per account, gone when they expire or are destroyed, and never another account's.
@Suite struct PushSubscriptionTests {
    @Test(arguments: StoreEngineKind.allCases) func aSubscriptionIsMadeVerifiedChangedAndDestroyed(
        engine: StoreEngineKind
    ) async throws {
        let fixture = try StoreFixture(engine: engine)
        let alice = try await fixture.account("alice")
        let bob = try await fixture.account("bob")
        let store = fixture.store
        let expires = fixture.clock.secondsSince1970 + 3600
        let made = try await store.createPushSubscription(
            accountID: alice.id, deviceClientID: "phone-1", url: "https://push.example.test/a", keys: "k.a",
            types: ["Email", "Thread"], expiresAt: expires)
        #expect(made.id.count == 22 && made.verificationCode.count == 22 && made.id != made.verificationCode)
        #expect(!made.isVerified)
        #expect(try await store.pushSubscriptions(accountID: alice.id) == [made])
        #expect(try await store.pushSubscriptions(accountID: bob.id).isEmpty)

        // Another account can neither change nor destroy it.
        #expect(try await store.updatePushSubscription(id: made.id, accountID: bob.id, verified: true) == nil)
        #expect(try await !store.deletePushSubscription(id: made.id, accountID: bob.id))

        let verified = try #require(
            try await store.updatePushSubscription(
                id: made.id, accountID: alice.id, verified: true, expiresAt: expires + 60, types: .some(nil)))
        #expect(verified.isVerified && verified.types == nil && verified.expiresAt == expires + 60)
        #expect(verified.url == made.url && verified.keys == "k.a" && verified.deviceClientID == "phone-1")

        #expect(try await store.deletePushSubscription(id: made.id, accountID: alice.id))
        #expect(try await store.pushSubscriptions(accountID: alice.id).isEmpty)
        #expect(try await store.updatePushSubscription(id: made.id, accountID: alice.id, verified: true) == nil)
    }

    @Test(arguments: StoreEngineKind.allCases) func anExpiredSubscriptionIsNotListedAndIsPurged(
        engine: StoreEngineKind
    ) async throws {
        let fixture = try StoreFixture(engine: engine)
        let alice = try await fixture.account("alice")
        _ = try await fixture.store.createPushSubscription(
            accountID: alice.id, deviceClientID: "d", url: "https://push.example.test/a", keys: "", types: nil,
            expiresAt: fixture.clock.secondsSince1970 + 10)
        let lasting = try await fixture.store.createPushSubscription(
            accountID: alice.id, deviceClientID: "d", url: "https://push.example.test/b", keys: "", types: nil,
            expiresAt: fixture.clock.secondsSince1970 + 100)
        fixture.advance(11)
        #expect(try await fixture.store.pushSubscriptions(accountID: alice.id) == [lasting])
        #expect(try await fixture.store.purgePushSubscriptions() == 1)
    }

    @Test(arguments: StoreEngineKind.allCases) func anAccountHoldsAtMostTheCap(engine: StoreEngineKind) async throws {
        let fixture = try StoreFixture(engine: engine)
        let alice = try await fixture.account("alice")
        for n in 0..<MailboxStore.maximumPushSubscriptionsPerAccount {
            _ = try await fixture.store.createPushSubscription(
                accountID: alice.id, deviceClientID: "d\(n)", url: "https://push.example.test/\(n)", keys: "",
                types: nil, expiresAt: fixture.clock.secondsSince1970 + 100)
        }
        await #expect(throws: MailboxStoreError.tooManyDevices) {
            try await fixture.store.createPushSubscription(
                accountID: alice.id, deviceClientID: "one more", url: "https://push.example.test/x", keys: "",
                types: nil, expiresAt: fixture.clock.secondsSince1970 + 100)
        }
        await #expect(throws: MailboxStoreError.invalidArgument("deviceClientId")) {
            try await fixture.store.createPushSubscription(
                accountID: alice.id, deviceClientID: "", url: "https://push.example.test/x", keys: "", types: nil,
                expiresAt: fixture.clock.secondsSince1970 + 100)
        }
    }

    @Test(arguments: StoreEngineKind.allCases) func aSubscriptionEndsWithTheSessionThatMadeIt(
        engine: StoreEngineKind
    ) async throws {
        let fixture = try StoreFixture(engine: engine)
        let alice = try await fixture.account("alice")
        let store = fixture.store
        let session = try await store.createSession(
            accountID: alice.id, tokenHash: [UInt8](repeating: 7, count: 32), deviceName: "phone")
        func make(_ sessionID: Int64?) async throws -> PushSubscriptionRecord {
            try await store.createPushSubscription(
                accountID: alice.id, sessionID: sessionID, deviceClientID: "d", url: "https://push.example.test/a",
                keys: "", types: nil, expiresAt: fixture.clock.secondsSince1970 + 100)
        }
        let bySession = try await make(session.id)
        let byPassword = try await make(nil)
        #expect(bySession.sessionID == session.id && byPassword.sessionID == nil)
        #expect(try await store.revokeSession(id: session.id, accountID: alice.id))
        #expect(try await store.pushSubscriptions(accountID: alice.id) == [byPassword])
        _ = try await make(nil)
        try await store.revokeAllSessions(accountID: alice.id)
        #expect(try await store.pushSubscriptions(accountID: alice.id).isEmpty)
    }
}
