import Durations
import Foundation
import OpenSSLCrypto
import TestSupport
import Testing

@testable import APNs

@Suite("Provider token manager refresh rules")
struct ProviderTokenManagerTests {
    let key: APNsSigningKey
    let clock = ManualClock(start: Date(timeIntervalSince1970: 1_700_000_000))

    init() throws {
        key = APNsSigningKey(privateKey: try P256PrivateKey(), keyID: "KEY1234567", teamID: "TEAM123456")
    }

    func makeManager() -> ProviderTokenManager {
        ProviderTokenManager(signingKey: key, clock: clock)
    }

    @Test func tokenIsAValidES256JWT() async throws {
        let manager = makeManager()
        let token = try await manager.token()
        let claims = try JWT.verifyES256(token.value, key: key.privateKey.publicKey)
        #expect(claims == JWTClaims(keyID: "KEY1234567", issuer: "TEAM123456", issuedAt: 1_700_000_000))
        #expect(token.issuedAt == clock.now())
        #expect(!"\(token)".contains(token.value))
    }

    @Test func reusesUntilFiftyMinutesThenRefreshes() async throws {
        let manager = makeManager()
        let first = try await manager.token()
        clock.advance(by: 49.9 * 60)
        #expect(try await manager.token() == first)
        #expect(await manager.tokensIssued == 1)
        clock.advance(by: 0.1 * 60)
        let second = try await manager.token()
        #expect(second != first)
        #expect(second.issuedAt == clock.now())
        clock.advance(by: 30 * 60)
        #expect(try await manager.token() == second)
        #expect(await manager.tokensIssued == 2)
    }

    @Test func expiredProviderTokenRefreshesOnceWithinTwentyMinutes() async throws {
        let manager = makeManager()
        let first = try await manager.token()
        clock.advance(by: 1 * 60)
        // APNs says ExpiredProviderToken (e.g. clock skew): the first forced refresh is allowed at once.
        #expect(await manager.invalidate(first))
        let second = try await manager.token()
        #expect(second != first)
        // Another expiry within 20 minutes of that refresh: keep the token, no new update.
        clock.advance(by: 5 * 60)
        #expect(await manager.invalidate(second) == false)
        #expect(try await manager.token() == second)
        clock.advance(by: 14.9 * 60)
        #expect(await manager.invalidate(second) == false)
        #expect(try await manager.token() == second)
        // Twenty minutes after the refresh the token may change again.
        clock.advance(by: 0.1 * 60)
        #expect(await manager.invalidate(second))
        let third = try await manager.token()
        #expect(third != second)
        #expect(await manager.tokensIssued == 3)
    }

    @Test func tokenOlderThanTwentyMinutesMayAlwaysBeReplaced() async throws {
        let manager = makeManager()
        let first = try await manager.token()
        clock.advance(by: 1 * 60)
        #expect(await manager.invalidate(first))
        let second = try await manager.token()
        clock.advance(by: 25 * 60)
        #expect(await manager.invalidate(second))
        #expect(try await manager.token() != second)
    }

    @Test func invalidatingAReplacedTokenDoesNothing() async throws {
        let manager = makeManager()
        let first = try await manager.token()
        clock.advance(by: 55 * 60)
        let second = try await manager.token()
        #expect(await manager.invalidate(first))
        #expect(try await manager.token() == second)
        #expect(await manager.tokensIssued == 2)
    }

    @Test func concurrentInvalidationsCauseOneRefresh() async throws {
        let manager = makeManager()
        let stale = try await manager.token()
        clock.advance(by: 2 * 60)
        let tokens = try await withThrowingTaskGroup(of: ProviderToken.self) { group in
            for _ in 0..<64 {
                group.addTask {
                    await manager.invalidate(stale)
                    return try await manager.token()
                }
            }
            return try await group.reduce(into: Set<ProviderToken>()) { $0.insert($1) }
        }
        #expect(tokens.count == 1)
        #expect(!tokens.contains(stale))
        #expect(await manager.tokensIssued == 2)
    }

    @Test func readsP8Files() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("key.p8")
        try key.privateKey.pemRepresentation.write(toFile: path, atomically: true, encoding: .utf8)
        let loaded = try APNsSigningKey(p8File: path, keyID: "K", teamID: "T")
        let token = try loaded.makeToken(issuedAt: Date(timeIntervalSince1970: 5))
        #expect(try JWT.verifyES256(token.value, key: key.privateKey.publicKey).issuedAt == 5)
        #expect(throws: (any Error).self) { try APNsSigningKey(pem: "not a key", keyID: "K", teamID: "T") }
    }
}
