import Durations
import Foundation
import MailboxStore
import OpenSSLCrypto
import Push
import TestSupport
import Testing

/// Sessions end: after an idle timeout, after an absolute lifetime, when an account holds more than its cap (the
/// least recently used first), and all at once when the account signs out everywhere. On both engines.
@Suite struct SessionTests {
    static func fixture(_ engine: StoreEngineKind, cap: Int = 20) throws -> StoreFixture {
        try StoreFixture(engine: engine) { configuration in
            configuration.sessionIdleTimeout = 1000
            configuration.sessionLifetime = 5000
            configuration.maximumSessionsPerAccount = cap
        }
    }

    @discardableResult
    static func signIn(_ f: StoreFixture, _ account: Account, _ n: Int) async throws -> [UInt8] {
        try await session(f, account, n).hash
    }

    static func session(
        _ f: StoreFixture, _ account: Account, _ n: Int
    ) async throws -> (hash: [UInt8], record: SessionRecord) {
        let hash = SHA256.hash("token-\(account.id)-\(n)")
        return (
            hash, try await f.store.createSession(accountID: account.id, tokenHash: hash, deviceName: "device \(n)")
        )
    }

    @Test(arguments: StoreEngineKind.allCases) func anIdleSessionEndsAndOneInUseDoesNot(
        engine: StoreEngineKind
    ) async throws {
        let f = try Self.fixture(engine)
        let alice = try await f.account("alice")
        let used = try await Self.signIn(f, alice, 1)
        let idle = try await Self.signIn(f, alice, 2)
        // One is used every 400 s (its last use is written: more than a tenth of the idle timeout went by); the
        // other not at all.
        for _ in 0..<3 {
            f.advance(400)
            let session = try #require(try await f.store.session(tokenHash: used))
            #expect(session.lastUsedAt == f.clock.secondsSince1970)
        }
        #expect(try await f.store.session(tokenHash: used) != nil)
        #expect(try await f.store.session(tokenHash: idle) == nil, "unused for 1200 s of a 1000 s idle timeout")
        // A use within a tenth of the timeout is not written again: reads stay reads.
        f.advance(50)
        #expect(try await f.store.session(tokenHash: used)?.lastUsedAt == f.clock.secondsSince1970 - 50)
    }

    @Test(arguments: StoreEngineKind.allCases) func aSessionEndsAtItsLifetimeHoweverMuchItIsUsed(
        engine: StoreEngineKind
    ) async throws {
        let f = try Self.fixture(engine)
        let alice = try await f.account("alice")
        let token = try await Self.signIn(f, alice, 1)
        for _ in 0..<9 {
            f.advance(500)
            #expect(try await f.store.session(tokenHash: token) != nil)
        }
        f.advance(501)
        #expect(try await f.store.session(tokenHash: token) == nil, "5001 s old, of a 5000 s lifetime")
        // Ended sessions are purged by housekeeping once they are a day past their end.
        #expect(try await f.store.purgeSessions(olderThan: 86_400) == 0)
        f.advance(86_400)
        #expect(try await f.store.purgeSessions(olderThan: 86_400) == 1)
    }

    @Test(arguments: StoreEngineKind.allCases) func theCapEndsTheLeastRecentlyUsedSessionWithItsDevices(
        engine: StoreEngineKind
    ) async throws {
        let f = try Self.fixture(engine, cap: 3)
        let alice = try await f.account("alice")
        let bob = try await f.account("bob")
        var sessions: [(hash: [UInt8], record: SessionRecord)] = []
        for n in 1...3 {
            sessions.append(try await Self.session(f, alice, n))
            f.advance(200)
        }
        // The first is the oldest but is used now, as is the third: the second is the least recently used.
        _ = try await f.store.registerDevice(
            address: .apns(StoreFixture.token(2), topic: "com.example.mail", environment: .sandbox),
            accountID: alice.id, sessionID: sessions[1].record.id)
        #expect(try await f.store.session(tokenHash: sessions[0].hash)?.lastUsedAt == f.clock.secondsSince1970)
        #expect(try await f.store.session(tokenHash: sessions[2].hash)?.lastUsedAt == f.clock.secondsSince1970)
        try await Self.signIn(f, bob, 1)
        let fourth = try await Self.signIn(f, alice, 4)
        #expect(try await f.store.session(tokenHash: sessions[1].hash) == nil, "the least recently used ended")
        #expect(try await f.store.devices(accountID: alice.id).isEmpty, "with the device it registered")
        for kept in [sessions[0].hash, sessions[2].hash, fourth] {
            #expect(try await f.store.session(tokenHash: kept) != nil)
        }
        #expect(try await f.store.session(tokenHash: SHA256.hash("token-\(bob.id)-1")) != nil, "bob's are his own")
    }

    @Test(arguments: StoreEngineKind.allCases) func signingOutEverywhereEndsEverySessionAndDevice(
        engine: StoreEngineKind
    ) async throws {
        let f = try Self.fixture(engine)
        let alice = try await f.account("alice")
        let bob = try await f.account("bob")
        let tokens = [try await Self.signIn(f, alice, 1), try await Self.signIn(f, alice, 2)]
        let bobs = try await Self.signIn(f, bob, 1)
        let session = try #require(try await f.store.session(tokenHash: tokens[0]))
        _ = try await f.store.registerDevice(
            address: .apns(StoreFixture.token(5), topic: "com.example.mail", environment: .sandbox),
            accountID: alice.id, sessionID: session.id)
        _ = try await f.store.registerDevice(
            address: .apns(StoreFixture.token(6), topic: "com.example.mail", environment: .sandbox),
            accountID: bob.id, sessionID: nil)
        #expect(try await f.store.revokeAllSessions(accountID: alice.id) == 2)
        for token in tokens { #expect(try await f.store.session(tokenHash: token) == nil) }
        #expect(try await f.store.devices(accountID: alice.id).isEmpty)
        #expect(try await f.store.session(tokenHash: bobs) != nil)
        #expect(try await f.store.devices(accountID: bob.id).count == 1)
    }
}
