import APNsSimulator
import Durations
import Foundation
import OpenSSLCrypto
import Testing

/// The gateway's logic called directly, without sockets: token caching, the log bound, fault replay.
@Suite("APNsGateway logic")
struct GatewayTests {
    private func makeGateway(
        logCapacity: Int = 100, faults: APNsFaults = APNsFaults()
    ) throws -> (
        APNsGateway, P256PrivateKey, ManualClock
    ) {
        let key = try P256PrivateKey()
        let clock = ManualClock()
        let configuration = APNsGatewayConfiguration(
            providerKeys: [ProviderKey(keyID: "KEY1234567", teamID: "TEAM123456", publicKey: try key.publicKey)],
            faults: faults, logCapacity: logCapacity)
        return (APNsGateway(configuration: configuration, clock: clock), key, clock)
    }

    private func request(token: String, jwt: String) -> APNsProviderRequest {
        APNsProviderRequest(
            method: "POST", path: "/3/device/\(token)",
            headers: [.init("authorization", "bearer \(jwt)"), .init("apns-topic", "com.example.mail")],
            body: Data(#"{"aps":{"badge":1}}"#.utf8))
    }

    @Test func verifiedTokensAreCachedAndAgeIsCheckedEachTime() throws {
        let (gateway, key, clock) = try makeGateway()
        let token = gateway.registerDevice(topic: "com.example.mail")
        let jwt = try JWT.makeES256(
            claims: JWTClaims(
                keyID: "KEY1234567", issuer: "TEAM123456", issuedAt: Int64(clock.now().timeIntervalSince1970)),
            key: key)
        let statuses = (0..<50).map { _ in gateway.handle(request(token: token, jwt: jwt)).status }
        clock.advance(by: 3601)
        let late = gateway.handle(request(token: token, jwt: jwt))
        #expect(statuses.allSatisfy { $0 == 200 })
        #expect(gateway.metrics.tokenVerifications == 1)
        #expect(late.reason == .expiredProviderToken)
    }

    @Test func logKeepsOnlyTheNewestEntries() throws {
        let (gateway, _, _) = try makeGateway(logCapacity: 10)
        for _ in 0..<25 { _ = gateway.handle(APNsProviderRequest(method: "GET", path: "/3/device/x")) }
        let entries = gateway.logEntries()
        #expect(entries.count == 10)
        #expect(entries.first?.sequence == 16)
        #expect(entries.last?.sequence == 25)
        #expect(gateway.logEntries(after: 20).map(\.sequence) == [21, 22, 23, 24, 25])
    }

    @Test func logKeepsLongHeadersAndLaterEventsAcrossTheRing() throws {
        let (gateway, key, clock) = try makeGateway(logCapacity: 3)
        let token = gateway.registerDevice(topic: "com.example.mail")
        let jwt = try JWT.makeES256(
            claims: JWTClaims(
                keyID: "KEY1234567", issuer: "TEAM123456", issuedAt: Int64(clock.now().timeIntervalSince1970)),
            key: key)
        let long = String(repeating: "v", count: 300)
        for index in 0..<5 {
            var push = request(token: token, jwt: jwt)
            push.headers += [.init("x-long", long), .init("apns-id", "00000000-0000-4000-8000-00000000000\(index)")]
            #expect(gateway.handle(push).status == 200)
        }
        let entries = gateway.logEntries()
        #expect(entries.map(\.sequence) == [3, 4, 5])
        #expect(entries.map(\.outcome) == [.coalesced, .coalesced, .stored])
        #expect(entries[0].events.map(\.outcome) == [.stored, .coalesced])
        #expect(entries[0].events.last?.detail == "replaced by 00000000-0000-4000-8000-000000000003")
        #expect(entries[2].apnsId == "00000000-0000-4000-8000-000000000004")
        #expect(entries.allSatisfy { $0.headers["x-long"] == long && $0.headers["authorization"] == "[redacted]" })
        #expect(entries.allSatisfy { $0.payload == #"{"aps":{"badge":1}}"# && $0.deviceToken == token })
        #expect(gateway.logEntries(after: 4).map(\.sequence) == [5])
        #expect(gateway.logEntries(after: 5).isEmpty)
        #expect(gateway.logEntries(after: .max).isEmpty)
        #expect(gateway.logEntries(limit: 2).map(\.sequence) == [3, 4])
        #expect(gateway.metrics.responses == [APNsMetrics.Response(status: 200, reason: ""): 5])
    }

    @Test func logReportsHeadersJoinedAndRedactedAndThePayloadCut() throws {
        let key = try P256PrivateKey()
        let clock = ManualClock()
        let configuration = APNsGatewayConfiguration(
            providerKeys: [ProviderKey(keyID: "KEY1234567", teamID: "TEAM123456", publicKey: try key.publicKey)],
            logCapacity: 10, logPayloadLimit: 12)
        let gateway = APNsGateway(configuration: configuration, clock: clock)
        let token = gateway.registerDevice(topic: "com.example.mail")
        let jwt = try JWT.makeES256(
            claims: JWTClaims(
                keyID: "KEY1234567", issuer: "TEAM123456", issuedAt: Int64(clock.now().timeIntervalSince1970)),
            key: key)
        let body = #"{"aps":{"badge":1},"acct":"é-alias"}"#
        let response = gateway.handle(
            APNsProviderRequest(
                method: "POST", path: "/3/device/\(token)",
                headers: [
                    .init("Authorization", "bearer \(jwt)"), .init("apns-topic", "com.example.mail"),
                    .init("X-Trace", "one"), .init("x-trace", "two"),
                ],
                body: Data(body.utf8)))
        #expect(response.status == 200)
        _ = gateway.handle(
            APNsProviderRequest(
                method: "POST", path: "/3/device/\(token)", headers: [.init("apns-topic", "com.example.mail")],
                body: Data("{}".utf8)))
        let entries = gateway.logEntries()
        try #require(entries.count == 2)
        let first = entries[0]
        #expect(
            first.headers == ["authorization": "[redacted]", "apns-topic": "com.example.mail", "x-trace": "one, two"])
        #expect(!first.headers.values.contains { $0.contains(jwt) })
        #expect(first.payload == String(decoding: Data(body.utf8).prefix(12), as: UTF8.self))
        #expect(first.payloadTruncated)
        #expect(first.outcome == .stored)
        #expect(first.deviceToken == token)
        #expect(first.method == "POST")
        #expect(first.status == 200)
        let second = entries[1]
        #expect(second.headers == ["apns-topic": "com.example.mail"])
        #expect(second.payload == "{}")
        #expect(!second.payloadTruncated)
        #expect(second.status == 403)
        #expect(second.reason == "MissingProviderToken")
        #expect(second.outcome == .refused)
    }

    @Test func faultInjectorReplaysBySeed() {
        let configuration = APNsFaults(
            SimulatorFaults(dropProbability: 0.25, status429Probability: 0.25, status503Probability: 0.25, seed: 99))
        var first = APNsFaultInjector(configuration: configuration)
        var second = APNsFaultInjector(configuration: configuration)
        let a = (0..<200).map { _ in first.nextDecision() }
        let b = (0..<200).map { _ in second.nextDecision() }
        #expect(a == b)
        #expect(Set(a.map { "\($0)" }).count == 4)
    }

    @Test func everyReasonHasApplesStatus() {
        #expect(RejectionReason.unregistered.status == 410)
        #expect(RejectionReason.payloadTooLarge.status == 413)
        #expect(RejectionReason.tooManyProviderTokenUpdates.status == 429)
        #expect(RejectionReason.allCases.allSatisfy { (400...503).contains($0.status) })
        let body = APNsProviderResponse(status: 410, apnsID: "x", reason: .unregistered, timestamp: 12).body
        #expect(String(decoding: body, as: UTF8.self) == #"{"reason":"Unregistered","timestamp":12}"#)
    }
}
