import Foundation
import OpenSSLCrypto
import SimulatorSupport
import Testing
import WebPushSimulator

/// The push resource's checks, as a real push service makes them: RFC 8030 headers, the body, RFC 8292 VAPID.
@Suite struct PushValidationTests {
    @Test func aCorrectPushIsAcceptedWithLocationAndTTL() throws {
        let harness = try GatewayHarness()
        let subscription = try harness.subscribe()
        let sink = harness.connect(subscription)
        let response = try harness.push(#"{"acct":"a1"}"#, to: subscription, ["ttl": "120", "topic": "mail-a1"])
        #expect(response.status == 201)
        let location = try #require(response.header("location"))
        #expect(location.hasPrefix(GatewayHarness.base + "/m/"))
        #expect(response.header("ttl") == "120")
        #expect(sink.plaintexts == [#"{"acct":"a1"}"#])
        let event = try #require(sink.received.first)
        #expect(event["bodyBytes"] as? Int == 200)
        #expect(event["ttl"] as? Int == 120)
        #expect(event["urgency"] as? String == "normal")
        #expect(event["topic"] as? String == "mail-a1")
        #expect(event["messageId"] as? String == String(location.split(separator: "/").last ?? ""))
        let entry = try #require(harness.lastEntry())
        #expect(entry.outcome == .delivered)
        #expect(entry.layout == WebPushBodyLayout(recordSize: 4096, paddingLength: 200 - 86 - 17 - 13))
        #expect(entry.vapid?.signatureValid == true)
        #expect(entry.vapid?.aud == GatewayHarness.base)
    }

    @Test func ttlIsRequiredAndMustBeANonNegativeInteger() throws {
        let harness = try GatewayHarness { $0.maxTTL = 1000 }
        let subscription = try harness.subscribe()
        for bad in [nil, "", "-1", "1.5", "soon"] as [String?] {
            let response = try harness.push("x", to: subscription, ["ttl": bad])
            #expect(response.status == 400, "TTL \(bad ?? "absent")")
            #expect(response.json?["message"] as? String != nil)
        }
        #expect(try harness.push("x", to: subscription, ["ttl": "0"]).status == 201)
        // Longer than the service keeps: cut, and the answer says so.
        #expect(try harness.push("x", to: subscription, ["ttl": "999999"]).header("ttl") == "1000")
    }

    @Test func urgencyMustBeOneOfFour() throws {
        let harness = try GatewayHarness()
        let subscription = try harness.subscribe()
        for good in ["very-low", "low", "normal", "high"] {
            #expect(try harness.push("x", to: subscription, ["urgency": good]).status == 201)
        }
        #expect(try harness.push("x", to: subscription, ["urgency": nil]).status == 201)
        for bad in ["urgent", "", "very_low"] {
            #expect(try harness.push("x", to: subscription, ["urgency": bad]).status == 400)
        }
    }

    @Test func topicIsAtMost32Base64URLCharacters() throws {
        let harness = try GatewayHarness()
        let subscription = try harness.subscribe()
        #expect(try harness.push("x", to: subscription, ["topic": String(repeating: "a", count: 32)]).status == 201)
        #expect(try harness.push("x", to: subscription, ["topic": "A-z_09"]).status == 201)
        for bad in [String(repeating: "a", count: 33), "has space", "slash/", "pad=", ""] {
            #expect(try harness.push("x", to: subscription, ["topic": bad]).status == 400, "\(bad)")
        }
    }

    @Test func bodiesOver4096BytesAre413AndNeedAes128gcm() throws {
        let harness = try GatewayHarness()
        let subscription = try harness.subscribe()
        let large = try harness.encrypt("x", for: subscription, bodyLength: 4097 - 0)
        #expect(harness.push(to: subscription, large, headers: try harness.headers()).status == 413)
        let fits = try harness.encrypt("x", for: subscription, bodyLength: 4096)
        #expect(harness.push(to: subscription, fits, headers: try harness.headers()).status == 201)
        let body = try harness.encrypt("x", for: subscription)
        #expect(
            harness.push(to: subscription, body, headers: try harness.headers(["content-encoding": nil])).status == 400)
        #expect(
            harness.push(to: subscription, body, headers: try harness.headers(["content-encoding": "aesgcm"])).status
                == 415)
        // No body, no coding needed.
        #expect(
            harness.push(to: subscription, Data(), headers: try harness.headers(["content-encoding": nil])).status
                == 201)
    }

    @Test func everyVAPIDRefusalIs401() throws {
        let harness = try GatewayHarness()
        let subscription = try harness.subscribe()
        let server = harness.server
        let now = Int64(harness.clock.now().timeIntervalSince1970)
        let k = server.publicKeyText
        let other = try P256PrivateKey()
        let cases: [(String, String?)] = [
            ("missing", nil),
            ("another scheme", "WebPush \(try server.token(audience: GatewayHarness.base, expiry: now + 60))"),
            ("bearer", "Bearer abc"),
            ("no k", "vapid t=\(try server.token(audience: GatewayHarness.base, expiry: now + 60))"),
            ("no t", "vapid k=\(k)"),
            ("k not a point", "vapid t=\(try server.token(audience: GatewayHarness.base, expiry: now + 60)), k=AAAA"),
            ("not a JWT", "vapid t=not.a.jwt, k=\(k)"),
            (
                "bad signature",
                "vapid t=\(try server.token(audience: GatewayHarness.base, expiry: now + 60, signer: other)), k=\(k)"
            ),
            ("aud missing", "vapid t=\(try server.token(audience: nil, expiry: now + 60)), k=\(k)"),
            (
                "aud another origin",
                "vapid t=\(try server.token(audience: "https://other.test", expiry: now + 60)), k=\(k)"
            ),
            (
                "aud with a path",
                "vapid t=\(try server.token(audience: GatewayHarness.base + "/wpush", expiry: now + 60)), k=\(k)"
            ),
            ("exp missing", "vapid t=\(try server.token(audience: GatewayHarness.base, expiry: nil)), k=\(k)"),
            ("exp past", "vapid t=\(try server.token(audience: GatewayHarness.base, expiry: now - 1)), k=\(k)"),
            (
                "exp beyond 24 h",
                "vapid t=\(try server.token(audience: GatewayHarness.base, expiry: now + 86_400 + 60)), k=\(k)"
            ),
            (
                "sub missing",
                "vapid t=\(try server.token(audience: GatewayHarness.base, expiry: now + 60, subject: nil)), k=\(k)"
            ),
            (
                "sub not mailto or https",
                "vapid t=\(try server.token(audience: GatewayHarness.base, expiry: now + 60, subject: "ops@example.com")), k=\(k)"
            ),
        ]
        for (name, authorization) in cases {
            let response = try harness.push("x", to: subscription, ["authorization": authorization])
            #expect(response.status == 401, "\(name)")
            #expect(response.json?["errno"] as? Int == 109, "\(name)")
            #expect(harness.lastEntry()?.outcome == .refused, "\(name)")
        }
        let quoted = "vapid t=\"\(try server.token(audience: GatewayHarness.base, expiry: now + 86_400))\",k=\"\(k)\""
        #expect(try harness.push("x", to: subscription, ["authorization": quoted]).status == 201)
    }

    @Test func aKeyOtherThanTheApplicationServerKeyIs403() throws {
        let harness = try GatewayHarness()
        let subscription = try harness.subscribe()
        let stranger = try ApplicationServer()
        let authorization = try stranger.authorization(audience: GatewayHarness.base, now: harness.clock.now())
        let response = try harness.push("x", to: subscription, ["authorization": authorization])
        #expect(response.status == 403)
        #expect(harness.lastEntry()?.vapid?.signatureValid == true)
    }

    /// A sender reuses its token for hours: each push is still judged by the token's expiry and the key.
    @Test func aReusedTokenIsCheckedForExpiryAndKeyEachTime() throws {
        let harness = try GatewayHarness()
        let subscription = try harness.subscribe()
        let headers = try harness.headers()
        for _ in 0..<3 {
            #expect(
                harness.push(to: subscription, try harness.encrypt("x", for: subscription), headers: headers).status
                    == 201)
        }
        let stranger = try ApplicationServer()
        let other = try harness.gateway.subscribe(applicationServerKey: stranger.publicKey)
        #expect(harness.push(to: other, try harness.encrypt("x", for: other), headers: headers).status == 403)
        harness.clock.advance(by: 12 * 3600 + 1)
        let expired = harness.push(to: subscription, try harness.encrypt("x", for: subscription), headers: headers)
        #expect(expired.status == 401)
        #expect(harness.lastEntry()?.vapid?.signatureValid == true)
        #expect(harness.lastEntry()?.error == "The VAPID token has expired.")
    }

    @Test func unknownAndDeletedSubscriptionsAre404And410() throws {
        let harness = try GatewayHarness()
        let subscription = try harness.subscribe()
        #expect(harness.push(to: subscription, Data(), headers: try harness.headers(), method: "GET").status == 405)
        var unknown = subscription
        unknown.endpoint = GatewayHarness.base + "/wpush/nobody"
        #expect(try harness.push("x", to: unknown).status == 404)
        #expect(
            harness.gateway.handle(
                SimulatorProviderRequest(
                    method: "POST", path: "/elsewhere", headers: try harness.headers(), body: Data())
            ).status == 404)
        #expect(harness.lastEntry()?.path == "/elsewhere")
        #expect(harness.lastEntry()?.status == 404)
        #expect(harness.gateway.unsubscribe(subscription.id))
        let gone = try harness.push("x", to: subscription)
        #expect(gone.status == 410)
        #expect(gone.json?["error"] as? String == "Gone")
        #expect(harness.push(to: subscription, Data(), headers: try harness.headers(), method: "GET").status == 410)
    }

    @Test func anUndecryptableBodyIsAcceptedLoggedAndNotDelivered() throws {
        let harness = try GatewayHarness()
        let subscription = try harness.subscribe()
        let sink = harness.connect(subscription)
        var body = [UInt8](try harness.encrypt("secret", for: subscription))
        body[body.count - 1] ^= 1
        #expect(harness.push(to: subscription, Data(body), headers: try harness.headers()).status == 201)
        let entry = try #require(harness.lastEntry())
        #expect(entry.outcome == .undecryptable)
        #expect(entry.events.last?.detail == "undecryptable: the authentication tag does not verify")
        #expect(
            harness.push(to: subscription, Data(repeating: 7, count: 50), headers: try harness.headers()).status == 201)
        #expect(harness.lastEntry()?.events.last?.detail?.hasPrefix("undecryptable: aes128gcm header") == true)
        #expect(sink.received.isEmpty)
        #expect(harness.gateway.metrics.undecryptable == 2)
    }

    @Test func theLogHoldsNeitherTheTokenNorThePlaintext() throws {
        let harness = try GatewayHarness()
        let subscription = try harness.subscribe()
        let headers = try harness.headers()
        let token = try #require(headers.first { $0.name == "authorization" }?.value)
        let body = try harness.encrypt("canary-7f3a", for: subscription)
        #expect(harness.push(to: subscription, body, headers: headers).status == 201)
        let log = String(decoding: try JSONEncoder().encode(harness.gateway.logEntries()), as: UTF8.self)
        #expect(!log.contains("canary-7f3a"))
        let jwt = token.split(separator: "=", maxSplits: 1)[1].split(separator: ",")[0]
        #expect(!log.contains(jwt.split(separator: ".")[2]))
        #expect(!log.contains(String(jwt)))
        #expect(log.contains("\"bodyBytes\":200"))
    }

    @Test func theSubscriptionRecordsWhetherEveryBodyHadOneLength() throws {
        let harness = try GatewayHarness()
        let subscription = try harness.subscribe()
        for text in ["a", "much longer text"] {
            #expect(
                harness.push(
                    to: subscription, try harness.encrypt(text, for: subscription), headers: try harness.headers()
                ).status == 201)
        }
        #expect(harness.gateway.subscriptions().first?.uniformBodyLength == true)
        #expect(harness.gateway.subscriptions().first?.bodyLengths == [200])
        let other = try harness.encrypt("a", for: subscription, bodyLength: 180)
        #expect(harness.push(to: subscription, other, headers: try harness.headers()).status == 201)
        #expect(harness.gateway.subscriptions().first?.uniformBodyLength == false)
        #expect(harness.gateway.subscriptions().first?.bodyLengths == [200, 180])
    }
}
