import FCMSimulator
import Foundation
import OpenSSLCrypto
import SimulatorSupport
import Testing

@Suite struct TokenEndpointTests {
    @Test func aGoodAssertionGetsABearerToken() throws {
        let harness = GatewayHarness()
        for scope in [
            "https://www.googleapis.com/auth/cloud-platform", "https://www.googleapis.com/auth/firebase.messaging",
            "https://www.googleapis.com/auth/userinfo.email https://www.googleapis.com/auth/firebase.messaging",
        ] {
            let response = harness.grant(try harness.account.assertion(issuedAt: harness.clock.now(), scope: scope))
            #expect(response.status == 200)
            let json = try #require(response.json)
            #expect((json["access_token"] as? String)?.hasPrefix("ya29.") == true)
            #expect(json["expires_in"] as? Int == 3600)
            #expect(json["token_type"] as? String == "Bearer")
            #expect(response.header("content-type")?.hasPrefix("application/json") == true)
        }
        // The audience may also be the token URI of the account's file; an assertion without kid is fine.
        let noKid = try JWT.makeRS256(
            keyID: nil,
            claims: [
                "iss": .string(harness.account.clientEmail),
                "scope": .string("https://www.googleapis.com/auth/cloud-platform"),
                "aud": .string("https://oauth2.googleapis.com/token"),
                "iat": .integer(Int64(harness.clock.now().timeIntervalSince1970)),
                "exp": .integer(Int64(harness.clock.now().timeIntervalSince1970) + 600),
            ], key: harness.account.key)
        #expect(harness.grant(noKid).status == 200)
        let metrics = harness.gateway.metrics
        #expect(metrics.tokenRequests[harness.account.clientEmail] == 4)
        #expect(metrics.tokensIssued[harness.account.clientEmail] == 4)
        #expect(
            metrics.prometheusText.contains(
                #"fcm_sim_token_requests_total{client_email="\#(harness.account.clientEmail)"} 4"#))
        let log = harness.gateway.logEntries()
        #expect(log.count == 4)
        #expect(log.allSatisfy { $0.kind == "token" && $0.outcome == .granted && $0.body == nil })
    }

    private func expectRefusal(
        _ response: SimulatorProviderResponse, _ error: String, _ containing: String? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(response.status == 400, sourceLocation: sourceLocation)
        #expect(response.json?["error"] as? String == error, sourceLocation: sourceLocation)
        if let containing {
            #expect(
                (response.json?["error_description"] as? String)?.contains(containing) == true,
                "\(response.json ?? [:])", sourceLocation: sourceLocation)
        }
    }

    @Test func badAssertionsGetInvalidGrant() throws {
        let harness = GatewayHarness()
        let now = harness.clock.now()
        let account = harness.account
        // Signed with another key.
        let forged = try account.assertion(issuedAt: now, signingKey: TestServiceAccount.keys[2])
        expectRefusal(harness.grant(forged), "invalid_grant", "Invalid JWT Signature.")
        // Expired, or too long-lived, or from the future.
        expectRefusal(
            harness.grant(try account.assertion(issuedAt: now.addingTimeInterval(-4000))), "invalid_grant",
            "short-lived")
        expectRefusal(
            harness.grant(try account.assertion(issuedAt: now, lifetime: 7200)), "invalid_grant", "short-lived")
        expectRefusal(harness.grant(try account.assertion(issuedAt: now.addingTimeInterval(120))), "invalid_grant")
        #expect(harness.grant(try account.assertion(issuedAt: now.addingTimeInterval(30))).status == 200)
        // An issuer nobody trusts.
        let stranger = TestServiceAccount(project: "nobody", keyIndex: 2)
        expectRefusal(harness.grant(try stranger.assertion(issuedAt: now)), "invalid_grant", "account not found")
        // Another audience, a wrong scope, a kid that is not the account's.
        expectRefusal(
            harness.grant(try account.assertion(issuedAt: now, audience: "https://example.com/token")), "invalid_grant",
            "audience")
        expectRefusal(
            harness.grant(
                try account.assertion(issuedAt: now, scope: "https://www.googleapis.com/auth/devstorage.read_only")),
            "invalid_scope")
        let otherKid = TestServiceAccount(project: GatewayHarness.project, keyID: "ffff")
        expectRefusal(harness.grant(try otherKid.assertion(issuedAt: now)), "invalid_grant")
        // Not a JWT at all, or with another algorithm.
        expectRefusal(harness.grant("abc.def"), "invalid_grant")
        let es256 = try JWT.makeES256(
            claims: JWTClaims(keyID: "k", issuer: account.clientEmail, issuedAt: Int64(now.timeIntervalSince1970)),
            key: try P256PrivateKey())
        expectRefusal(harness.grant(es256), "invalid_grant")
        #expect(harness.gateway.metrics.tokenRequests[account.clientEmail] == 9)
        #expect(harness.gateway.metrics.tokensIssued[account.clientEmail] == 1)
        let refused = harness.gateway.logEntries().filter { $0.outcome == .refused }
        #expect(refused.count == 10)
        #expect(refused.allSatisfy { $0.status == 400 && $0.errorCode != nil })
    }

    @Test func badFormsGetTheirOwnErrors() {
        let harness = GatewayHarness()
        expectRefusal(harness.tokenRequest("assertion=x"), "invalid_request", "grant_type")
        expectRefusal(harness.tokenRequest("grant_type=refresh_token&refresh_token=x"), "unsupported_grant_type")
        expectRefusal(
            harness.tokenRequest("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"), "invalid_request",
            "assertion")
        expectRefusal(harness.tokenRequest(""), "invalid_request")
        let get = harness.gateway.handle(
            SimulatorProviderRequest(method: "GET", path: "/token", headers: [], body: Data()))
        #expect(get.status == 405)
    }

    @Test func accessTokensExpireAfterTheirLifetime() throws {
        let harness = GatewayHarness { $0.tokenLifetime = 60 }
        let device = try harness.register()
        let token = try harness.accessToken()
        #expect(harness.send(harness.message(to: device), accessToken: token).status == 200)
        harness.clock.advance(by: 61)
        let expired = harness.send(harness.message(to: device), accessToken: token)
        #expect(expired.status == 401)
        #expect(expired.error?["status"] as? String == "UNAUTHENTICATED")
        #expect(expired.errorInfoReason == "ACCESS_TOKEN_EXPIRED")
        let missing = harness.send(harness.message(to: device), accessToken: nil)
        #expect(missing.status == 401)
        #expect(missing.errorInfoReason == "CREDENTIALS_MISSING")
        let unknown = harness.send(harness.message(to: device), accessToken: "ya29.made-up")
        #expect(unknown.status == 401)
        #expect(try harness.accessToken() != token)
    }
}
