import Foundation
import OpenSSLCrypto
import Push
import TestSupport
import Testing

@testable import APNs

@Suite("APNsClient against a real HTTP/2 server", .serialized)
struct APNsClientTests {
    let signingKey: APNsSigningKey

    init() throws {
        signingKey = APNsSigningKey(privateKey: try P256PrivateKey(), keyID: "ABC123DEFG", teamID: "TEAM000001")
    }

    func makeClient(
        _ server: ScriptedAPNsServer, streams: Int = 1000, tokens: ProviderTokenManager? = nil,
        payloadLimit: PayloadGuard.Limit = .standard
    ) -> APNsClient {
        let manager = tokens ?? ProviderTokenManager(signingKey: signingKey)
        return APNsClient(
            configuration: .init(
                endpoint: .custom(url: server.baseURL, caFile: server.tls ? server.caFile : nil),
                authentication: .token(manager), maximumConcurrentStreams: streams, payloadLimit: payloadLimit))
    }

    @Test func deliversOverTLSWithExactWireFormat() async throws {
        let server = try ScriptedAPNsServer(answers: [testDeviceToken(1).hex: .init(uniqueId: "u-123")])
        let client = makeClient(server)
        let apnsID = UUID()
        let signal = try ContentFreeSignal(badge: 4, alias: "dev-Alias_1", tag: "q1w2e3r4t5y6u7i8")
        let notification = try APNsNotification(
            deviceToken: testDeviceToken(1), signal: signal, topic: testTopic, collapseID: try CollapseID("acct-1"),
            apnsID: apnsID)
        let before = Int64(Date().timeIntervalSince1970)
        let response = try await client.send(notification)
        #expect(response.apnsID == apnsID.uuidString.lowercased())
        #expect(response.uniqueID == "u-123")

        let request = try #require(try server.stats().requests.first)
        #expect(request.method == "POST")
        #expect(request.path == "/3/device/" + testDeviceToken(1).hex)
        #expect(
            request.body == #"{"aps":{"badge":4,"content-available":1},"acct":"dev-Alias_1","st":"q1w2e3r4t5y6u7i8"}"#)
        #expect(request.headers["apns-push-type"] == "alert")
        #expect(request.headers["apns-priority"] == "10")
        #expect(request.headers["apns-topic"] == "com.example.signalfetch")
        #expect(request.headers["apns-collapse-id"] == "acct-1")
        #expect(request.headers["apns-id"] == apnsID.uuidString.lowercased())
        let expiration = try #require(request.headers["apns-expiration"].flatMap { Int64($0) })
        #expect(expiration >= before + 3600 && expiration <= before + 3700)
        let authorization = try #require(request.headers["authorization"])
        #expect(authorization.hasPrefix("bearer "))
        let claims = try JWT.verifyES256(String(authorization.dropFirst(7)), key: signingKey.privateKey.publicKey)
        #expect(claims.keyID == "ABC123DEFG" && claims.issuer == "TEAM000001")
        #expect(client.connectionsOpened == 1)
    }

    @Test func backgroundSignalOverCleartextH2() async throws {
        let server = try ScriptedAPNsServer(tls: false)
        let client = makeClient(server)
        let notification = try APNsNotification(
            deviceToken: testDeviceToken(2), signal: .background(tag: try StateTag("Z9_-x8Y7w6V5u4T3")),
            topic: testTopic,
            expiration: .immediately)
        _ = try await client.send(notification)
        let request = try #require(try server.stats().requests.first)
        #expect(request.body == #"{"aps":{"content-available":1},"st":"Z9_-x8Y7w6V5u4T3"}"#)
        #expect(request.headers["apns-push-type"] == "background")
        #expect(request.headers["apns-priority"] == "5")
        #expect(request.headers["apns-expiration"] == "0")
    }

    @Test func everyReasonMapsToItsErrorAndDecision() async throws {
        var answers: [String: ScriptedAPNsServer.Answer] = [:]
        let reasons = APNsError.Reason.documentedReasons + ["SomethingNew"]
        for (index, reason) in reasons.enumerated() {
            let status = RetryPolicyTests.statusByReason[reason] ?? 400
            answers[testDeviceToken(100 + index).hex] = .init(
                status: status, reason: reason, retryAfter: status == 429 ? "3" : nil,
                timestamp: status == 410 ? 1_700_000_000_123 : nil)
        }
        let server = try ScriptedAPNsServer(answers: answers)
        let client = makeClient(server)
        for (index, reason) in reasons.enumerated() {
            let status = RetryPolicyTests.statusByReason[reason] ?? 400
            let apnsID = UUID()
            let notification = try APNsNotification(
                deviceToken: testDeviceToken(100 + index), signal: .background(), topic: testTopic, apnsID: apnsID)
            let result: Result<APNsResponse, APNsClientError>
            do {
                result = .success(try await client.send(notification))
            } catch {
                result = .failure(error)
            }
            guard case .failure(.rejected(let error)) = result else {
                Issue.record("\(reason): expected a rejection, got \(result)")
                continue
            }
            #expect(error.status == status, "\(reason)")
            #expect(error.reason == APNsError.Reason(reason))
            #expect(error.reason.rawValue == reason)
            #expect(error.apnsID == apnsID.uuidString.lowercased())
            #expect(error.timestamp == (status == 410 ? Date(timeIntervalSince1970: 1_700_000_000.123) : nil))
            #expect(error.retryAfter == (status == 429 ? .seconds(3) : nil))
            var policy = RetryPolicy()
            var random = SeededGenerator(seed: 9)
            let expected = reason == "SomethingNew" ? .discard : RetryPolicyTests.expectedKind(reason)
            #expect(RetryPolicyTests.kind(policy.next(after: result, using: &random)) == expected, "\(reason)")
        }
        #expect(client.connectionsOpened == 1)
    }

    @Test func staysWithinTheServersStreamLimit() async throws {
        let server = try ScriptedAPNsServer(maxStreams: 10, delay: 0.02)
        let client = makeClient(server)
        let result = await client.benchmark(count: 200, concurrency: 200) { index in
            try! APNsNotification(deviceToken: testDeviceToken(index), signal: .background(), topic: testTopic)
        }
        #expect(result.succeeded == 200)
        #expect(result.failed == 0)
        #expect(result.rate > 0)
        let stats = try server.stats(summary: true)
        #expect(stats.count == 200)
        #expect(stats.maxConcurrent <= 10)
        #expect(stats.maxConcurrent > 1)
        #expect(client.connectionsOpened == 1)
    }

    @Test func capsInFlightSendsItself() async throws {
        let server = try ScriptedAPNsServer(maxStreams: 100, delay: 0.02)
        let client = makeClient(server, streams: 4)
        let result = await client.benchmark(count: 60, concurrency: 60) { index in
            try! APNsNotification(deviceToken: testDeviceToken(index), signal: .background(), topic: testTopic)
        }
        #expect(result.succeeded == 60)
        #expect(client.maximumInFlight == 4)
        let stats = try server.stats(summary: true)
        #expect(stats.maxConcurrent <= 4)
        #expect(stats.count == 60)
    }

    @Test func expiredProviderTokenGetsANewTokenOnce() async throws {
        let device = testDeviceToken(7)
        let server = try ScriptedAPNsServer(answers: [device.hex: .init(expireFirstToken: true)])
        let tokens = ProviderTokenManager(signingKey: signingKey)
        let client = makeClient(server, tokens: tokens)
        let notification = try APNsNotification(deviceToken: device, signal: .background(), topic: testTopic)
        let report = await client.deliver(notification, retry: .init(baseDelay: .milliseconds(1)))
        #expect(report.action == .done)
        #expect(report.attempts == 2)
        #expect(await tokens.tokensIssued == 2)
        let requests = try server.stats().requests
        #expect(requests.count == 2)
        #expect(requests[0].headers["authorization"] != requests[1].headers["authorization"])
    }

    @Test func deliverRetriesThenGivesUp() async throws {
        let device = testDeviceToken(8)
        let server = try ScriptedAPNsServer(answers: [device.hex: .init(status: 503, reason: "ServiceUnavailable")])
        let client = makeClient(server)
        let notification = try APNsNotification(deviceToken: device, signal: .background(), topic: testTopic)
        let report = await client.deliver(
            notification, retry: .init(maximumAttempts: 3, baseDelay: .milliseconds(1), maximumDelay: .milliseconds(5)))
        guard case .giveUp(.rejected(let error)) = report.action else {
            Issue.record("expected giveUp, got \(report.action)")
            return
        }
        #expect(error.reason == .serviceUnavailable)
        #expect(report.attempts == 3)
        #expect(try server.stats().requests.count == 3)

        let gone = testDeviceToken(9)
        let goneServer = try ScriptedAPNsServer(
            answers: [gone.hex: .init(status: 410, reason: "Unregistered", timestamp: 1_700_000_000_000)])
        let goneReport = await makeClient(goneServer).deliver(
            try APNsNotification(deviceToken: gone, signal: .background(), topic: testTopic))
        #expect(
            goneReport.action
                == .dropRegistration(reason: .unregistered, timestamp: Date(timeIntervalSince1970: 1_700_000_000)))
        #expect(goneReport.attempts == 1)
    }

    @Test func clientCertificateAuthenticationSendsNoBearer() async throws {
        let server = try ScriptedAPNsServer(requireClientCertificateCA: true)
        let client = APNsClient(
            configuration: .init(
                endpoint: .custom(url: server.baseURL, caFile: server.caFile),
                authentication: .certificate(
                    certificateFile: server.clientCertificateFile, keyFile: server.clientKeyFile)))
        _ = try await client.send(
            try APNsNotification(deviceToken: testDeviceToken(3), signal: .background(), topic: testTopic))
        let request = try #require(try server.stats().requests.first)
        #expect(request.clientCert)
        #expect(request.headers["authorization"] == nil)
    }

    @Test func connectionFailureIsATransportError() async throws {
        let port = freeLocalPort()
        let client = APNsClient(
            configuration: .init(
                endpoint: .custom(url: "http://127.0.0.1:\(port)"),
                authentication: .token(ProviderTokenManager(signingKey: signingKey))))
        await #expect {
            try await client.send(
                try APNsNotification(deviceToken: testDeviceToken(4), signal: .background(), topic: testTopic))
        } throws: { error in
            guard case .transport = error as? APNsClientError else { return false }
            return true
        }
    }

    @Test func untrustedServerIsATransportError() async throws {
        let server = try ScriptedAPNsServer()
        let client = APNsClient(
            configuration: .init(
                endpoint: .custom(url: server.baseURL, caFile: server.clientCertificateFile),
                authentication: .token(ProviderTokenManager(signingKey: signingKey))))
        await #expect {
            try await client.send(
                try APNsNotification(deviceToken: testDeviceToken(5), signal: .background(), topic: testTopic))
        } throws: { error in
            guard case .transport = error as? APNsClientError else { return false }
            return true
        }
        #expect(try server.stats().requests.isEmpty)
    }

    @Test func guardRefusalIsADefectAndNothingIsSent() async throws {
        let server = try ScriptedAPNsServer()
        let client = makeClient(server)
        let notification = try APNsNotification(
            deviceToken: testDeviceToken(6), signal: .background(), topic: testTopic)
        let smuggled = Array(#"{"aps":{"content-available":1},"subject":"Quarterly results"}"#.utf8)
        await #expect(throws: APNsClientError.payloadRejected(PayloadGuardViolation(.unexpectedKey, at: "$"))) {
            try client.checkPayload(smuggled)
            _ = try await client.send(payloadAfterGuard: smuggled, notification: notification)
        }
        let legacyClient = makeClient(server, payloadLimit: .legacy)
        let oversized = Array(("{\"aps\":{\"badge\":1}" + String(repeating: " ", count: 2100) + "}").utf8)
        await #expect(
            throws: APNsClientError.payloadRejected(PayloadGuardViolation(.tooLarge(size: 2119, limit: 2048)))
        ) {
            try legacyClient.checkPayload(oversized)
            _ = try await legacyClient.send(payloadAfterGuard: oversized, notification: notification)
        }
        #expect(try server.stats().requests.isEmpty)
        var policy = RetryPolicy()
        #expect(
            policy.next(after: .failure(.payloadRejected(PayloadGuardViolation(.unexpectedKey))))
                == .discard(.payloadRejected(PayloadGuardViolation(.unexpectedKey))))
    }
}
