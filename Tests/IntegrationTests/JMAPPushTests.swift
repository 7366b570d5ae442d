import Foundation
import TestSupport
import Testing

/// JMAP push subscriptions (RFC 8620 §7.2) delivered through Web Push (RFC 8030, RFC 8291, RFC 9749), with the
/// real binaries: a standard JMAP client library (jmaplib), as a device holding its own keys, subscribes at
/// webpush-sim with the Session's VAPID key, creates a PushSubscription for that endpoint, proves it with the code
/// pushed to it and hears a delivery both pushed and over the event source; and mailboxd refuses subscriptions it
/// must not make.
@Suite(.serialized) struct JMAPPushTests {
    static let vapidCapability = "urn:ietf:params:jmap:webpush-vapid"

    /// Runs `calls` against `/jmap/api` with `token`; returns the method responses.
    func jmap(_ cluster: Cluster, token: String, _ calls: [[Any]]) async throws -> [[Any]] {
        let result = try await cluster.call(
            .post, cluster.api + "/jmap/api", token: token,
            json: ["using": ["urn:ietf:params:jmap:core"], "methodCalls": calls])
        try #require(result.status == 200, "JMAP request failed: \(result.status) \(result.body)")
        return try #require(result.body["methodResponses"] as? [[Any]], "\(result.body)")
    }

    /// The arguments of the one response to the call `id`, when it is `name`.
    func arguments(_ responses: [[Any]], _ name: String, id: String) -> [String: Any]? {
        guard let response = responses.first(where: { $0.count == 3 && $0[2] as? String == id }),
            response[0] as? String == name
        else { return nil }
        return response[1] as? [String: Any]
    }

    /// The Session's VAPID key, checked against the one `/v1` publishes.
    func vapidKey(_ cluster: Cluster, token: String) async throws -> String {
        let session = try await cluster.call(.get, cluster.api + "/.well-known/jmap", token: token)
        let capabilities = try #require(session.body["capabilities"] as? [String: Any], "\(session.body)")
        let vapid = try #require(capabilities[Self.vapidCapability] as? [String: Any], "\(capabilities.keys)")
        let key = try #require(vapid["applicationServerKey"] as? String)
        let published = try await cluster.call(.get, cluster.api + "/v1/webpush/vapid-public-key")
        #expect(published.body["publicKey"] as? String == key)
        return key
    }

    /// A subscription the simulated browser makes (it keeps the keys): its endpoint and public keys.
    func browserSubscription(_ cluster: Cluster, key: String) async throws -> (endpoint: String, keys: [String: Any]) {
        let created = try await cluster.call(
            .post, cluster.webPush + "/sim/subscriptions", json: ["applicationServerKey": key])
        try #require(created.status == 201, "webpush-sim subscription failed: \(created.status) \(created.body)")
        let subscription = try #require(created.body["subscription"] as? [String: Any])
        return (
            try #require(subscription["endpoint"] as? String), try #require(subscription["keys"] as? [String: Any])
        )
    }

    @Test func jmaplibSubscribesVerifiesHearsAChangeAndUnsubscribes() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"], webpush: true)
        let device = "jmaplib-push-device"
        let plan: [String: Any] = [
            "sessionUrl": cluster.api + "/.well-known/jmap", "username": "alice", "password": "password-alice",
            "ca": cluster.ca, "webPush": cluster.webPush, "deliveryUrl": cluster.api + "/v1/deliveries",
            "deliveryToken": cluster.deliveryToken, "deviceClientId": device,
        ]
        let planFile = cluster.directory.path("jmap-push-plan.json")
        try JSONSerialization.data(withJSONObject: plan).write(to: URL(fileURLWithPath: planFile))
        let result = try await offPool {
            try Subprocess.run(TestEnvironment.python, [TestEnvironment.peer("jmap_jmaplib_push.py"), planFile])
        }
        let parsed = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
        let out = try #require(parsed as? [String: Any], "no findings from jmaplib: \(result.stderr)")
        #expect(result.status == 0, "jmaplib: \(result.stderr)")
        #expect(out["error"] == nil, "\(out["error"] ?? "")")
        #expect(out["failures"] == nil, "\(out["failures"] ?? "")")
        #expect(out["username"] as? String == "alice")
        let account = try #require(out["accountId"] as? String)

        // The Session's VAPID key (RFC 9749) is mailboxd's Web Push key; the device subscribed with its own keys.
        let published = try await cluster.call(.get, cluster.api + "/v1/webpush/vapid-public-key")
        #expect(out["vapidKey"] as? String == published.body["publicKey"] as? String)
        #expect(out["vapidKeyBytes"] as? Int == 65)
        #expect(out["needsRecreating"] as? Bool == false)
        #expect(out["simKeysKept"] as? Bool == true)

        // Created, with `expires` cut from the 30 days asked to 7.
        let created = try #require(out["created"] as? [String: Any])
        let id = try #require(created["id"] as? String)
        let expiresIn = try #require(created["expiresInSeconds"] as? Double, "\(created)")
        #expect(expiresIn <= 7 * 86_400 + 5 && expiresIn > 7 * 86_400 - 300, "\(created)")
        #expect(created["expires"] as? String != created["requestedExpires"] as? String)

        // The PushVerification, read alike by http_ece and by jmaplib, in a padded 512-byte aes128gcm body.
        let verification = try #require(out["verification"] as? [String: Any])
        let ece = try #require(verification["ece"] as? [String: Any])
        let code = try #require(ece["verificationCode"] as? String)
        #expect(!code.isEmpty)
        #expect(ece["@type"] as? String == "PushVerification")
        #expect(ece["pushSubscriptionId"] as? String == id)
        #expect(Set(ece.keys) == ["@type", "pushSubscriptionId", "verificationCode"])
        let library = try #require(verification["jmaplib"] as? [String: Any])
        #expect(library["type"] as? String == "PushVerification")
        #expect(library["pushSubscriptionId"] as? String == id)
        #expect(library["verificationCode"] as? String == code)
        #expect(verification["claimed"] as? String == code)
        #expect(verification["bodyLength"] as? Int == 512)
        #expect(verification["bodyBytes"] as? Int == 512)

        // Nothing but the verification until the code comes back; a wrong code is refused.
        #expect(out["pushesBeforeVerification"] as? Int == 0)
        let before = try #require(out["stateBeforeVerification"] as? String)
        let wrong = try #require(out["wrongCode"] as? [String: Any])
        #expect(wrong["updated"] as? Bool == false)
        #expect(wrong["type"] as? String == "invalidProperties")
        #expect(wrong["properties"] as? [String] == ["verificationCode"])
        #expect(out["verified"] as? Bool == true)

        // A delivery is pushed (a StateChange naming only Email, as `types` asked) and heard over the event
        // source, both with the state Email/get answers afterwards.
        #expect(out["eventSourceOpened"] as? Bool == true)
        let state = try #require(out["emailState"] as? String)
        let pushed = try #require(out["pushedStateChange"] as? [String: Any], "\(out["pushes"] ?? "")")
        let pushedChange = try #require(pushed["ece"] as? [String: Any])
        #expect(pushedChange["@type"] as? String == "StateChange")
        #expect((pushedChange["changed"] as? [String: [String: String]]) == [account: ["Email": state]])
        #expect((pushed["jmaplib"] as? [String: [String: String]]) == [account: ["Email": state]])
        #expect(pushed["bodyLength"] as? Int == 512)
        #expect(out["pushedTypes"] as? [String] == ["Email"])
        #expect(out["pushedTypesAll"] as? Bool == true)
        let pushedStates = (out["pushes"] as? [[String: Any]] ?? []).map {
            (($0["ece"] as? [String: Any])?["changed"] as? [String: [String: String]])?[account]?["Email"]
        }
        #expect(!pushedStates.contains(before), "the change made before verification was pushed: \(pushedStates)")
        let heard = try #require(out["eventSourceStateChange"] as? [String: [String: String]], "\(out["events"] ?? "")")
        #expect(heard[account]?["Email"] == state)

        // A renewal for 30 days is cut to 7, and the answer says so.
        let renewal = try #require(out["renewal"] as? [String: Any])
        #expect(renewal["updated"] as? Bool == true)
        let renewedIn = try #require(renewal["expiresInSeconds"] as? Double, "\(renewal)")
        #expect(renewedIn <= 7 * 86_400 + 5 && renewedIn > 7 * 86_400 - 300, "\(renewal)")

        // PushSubscription/get: the subscription, verified, without url or keys; asking for either is forbidden.
        let listed = try #require(out["get"] as? [[String: Any]])
        #expect(listed.count == 1)
        let got = try #require(listed.first)
        #expect(got["id"] as? String == id)
        #expect(got["deviceClientId"] as? String == device)
        #expect(got["verificationCode"] as? String == code)
        #expect(got["types"] as? [String] == ["Email"])
        #expect(got["expires"] as? String == renewal["expires"] as? String)
        #expect(got["hasUrl"] as? Bool == false)
        #expect(got["hasKeys"] as? Bool == false)
        let forbidden = try #require(out["forbidden"] as? [String: [String: Any]])
        for name in ["url", "keys"] {
            let answer = try #require(forbidden[name], "\(forbidden)")
            #expect(answer["refusedLocally"] as? Bool == true, "jmaplib asked for \(name)")
            #expect(answer["status"] as? Int == 200)
            #expect(answer["response"] as? String == "error", "\(name): \(answer)")
            #expect(answer["type"] as? String == "forbidden", "\(name): \(answer)")
        }

        // Destroyed: gone from /get, and the next delivery is heard over the event source but not pushed.
        #expect(out["destroyed"] as? Bool == true)
        let after = try #require(out["getAfterDestroy"] as? [String: Any])
        #expect((after["list"] as? [String])?.isEmpty == true)
        #expect(after["notFound"] as? [String] == [id])
        let lastDelivery = try #require(out["afterDestroy"] as? [String: Any])
        #expect(lastDelivery["eventSourceHeard"] as? Bool == true)
        #expect(lastDelivery["pushes"] as? Int == 0)

        // What the push service saw: the verification and the one StateChange, each accepted, signed with the
        // Session's VAPID key and an aes128gcm body of 512 bytes; nothing for the change before verification, nothing
        // after the destroy.
        let simID = try #require(out["simSubscriptionId"] as? String)
        let log = try await cluster.call(.get, cluster.webPush + "/sim/log")
        let entries = try #require(try JSONSerialization.jsonObject(with: log.data) as? [[String: Any]])
        let pushes = entries.filter { $0["subscription"] as? String == simID }
        #expect(pushes.count == 2, "\(pushes)")
        for push in pushes {
            #expect(push["status"] as? Int == 201, "\(push)")
            #expect(push["bodyBytes"] as? Int == 512, "\(push)")
            #expect((push["headers"] as? [String: Any])?["contentEncoding"] as? String == "aes128gcm")
            let vapid = push["vapid"] as? [String: Any]
            #expect(vapid?["signatureValid"] as? Bool == true, "\(push)")
            #expect(vapid?["k"] as? String == out["vapidKey"] as? String)
        }
    }

    @Test func aKeylessSubscriptionAndARefusedEndpointAreRefused() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"], webpush: true)
        let token = try await cluster.login("alice")
        let browser = try await browserSubscription(cluster, key: try await vapidKey(cluster, token: token))
        let plainHTTP = "http://" + browser.endpoint.dropFirst("https://".count)
        let create: [String: Any] = [
            "keyless": ["deviceClientId": "d-keyless", "url": browser.endpoint, "types": ["Email"]],
            "loopback": ["deviceClientId": "d-loopback", "url": "https://127.0.0.1:1/x", "keys": browser.keys],
            "plainHTTP": ["deviceClientId": "d-http", "url": plainHTTP, "keys": browser.keys],
            "unknownType": [
                "deviceClientId": "d-type", "url": browser.endpoint, "keys": browser.keys, "types": ["Nope"],
            ],
            "accepted": ["deviceClientId": "d-accepted", "url": browser.endpoint, "keys": browser.keys],
        ]
        let responses = try await jmap(
            cluster, token: token,
            [["PushSubscription/set", ["create": create], "s"], ["PushSubscription/get", ["ids": NSNull()], "g"]])
        let set = try #require(arguments(responses, "PushSubscription/set", id: "s"), "\(responses)")
        #expect(set["accountId"] == nil)
        let notCreated = try #require(set["notCreated"] as? [String: [String: Any]], "\(set)")
        #expect(notCreated["keyless"]?["type"] as? String == "invalidProperties", "\(notCreated)")
        #expect(notCreated["keyless"]?["properties"] as? [String] == ["keys"], "\(notCreated)")
        #expect(notCreated["loopback"]?["type"] as? String == "invalidProperties", "\(notCreated)")
        #expect(notCreated["loopback"]?["properties"] as? [String] == ["url"], "\(notCreated)")
        #expect(notCreated["plainHTTP"]?["type"] as? String == "invalidProperties", "\(notCreated)")
        #expect(notCreated["plainHTTP"]?["properties"] as? [String] == ["url"], "\(notCreated)")
        #expect(notCreated["unknownType"]?["type"] as? String == "invalidProperties", "\(notCreated)")
        #expect(notCreated["unknownType"]?["properties"] as? [String] == ["types"], "\(notCreated)")
        #expect(notCreated["accepted"] == nil, "\(notCreated)")
        // Not an account's data: no account id, no state (RFC 8620 §7.2).
        #expect(set["oldState"] == nil && set["newState"] == nil, "\(set)")
        let created = try #require(set["created"] as? [String: [String: Any]], "\(set)")
        let id = try #require(created["accepted"]?["id"] as? String, "\(created)")
        #expect(created["accepted"]?["expires"] is String)

        // Only the accepted one exists, not yet verified.
        let get = try #require(arguments(responses, "PushSubscription/get", id: "g"), "\(responses)")
        #expect(get["accountId"] == nil && get["state"] == nil, "\(get)")
        let list = try #require(get["list"] as? [[String: Any]])
        #expect(list.map { $0["id"] as? String } == [id])
        #expect(list.first?["deviceClientId"] as? String == "d-accepted")
        #expect(list.first?["verificationCode"] is NSNull)
        #expect(list.first?["url"] == nil && list.first?["keys"] == nil)

        // The endpoint and its keys cannot change; a wrong code is refused and leaves it unverified.
        let updates = try await jmap(
            cluster, token: token,
            [
                ["PushSubscription/set", ["update": [id: ["url": "https://127.0.0.1:1/x"]]], "u1"],
                ["PushSubscription/set", ["update": [id: ["keys": browser.keys]]], "u2"],
                ["PushSubscription/set", ["update": [id: ["verificationCode": "not-the-code"]]], "u3"],
                ["PushSubscription/get", ["ids": [id], "properties": ["verificationCode"]], "g"],
            ])
        for (call, property) in [("u1", "url"), ("u2", "keys"), ("u3", "verificationCode")] {
            let answer = arguments(updates, "PushSubscription/set", id: call)
            let refused = (answer?["notUpdated"] as? [String: [String: Any]])?[id]
            #expect(refused?["type"] as? String == "invalidProperties", "\(call): \(answer ?? [:])")
            #expect(refused?["properties"] as? [String] == [property], "\(call): \(answer ?? [:])")
        }
        let unverified = arguments(updates, "PushSubscription/get", id: "g")?["list"] as? [[String: Any]]
        #expect(unverified?.first?["verificationCode"] is NSNull, "\(updates)")
    }

    @Test func withoutWebPushTheSessionHasNoVAPIDKeyAndNothingIsSubscribed() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"])
        let token = try await cluster.login("alice")
        let session = try await cluster.call(.get, cluster.api + "/.well-known/jmap", token: token)
        let capabilities = try #require(session.body["capabilities"] as? [String: Any], "\(session.body)")
        #expect(capabilities["urn:ietf:params:jmap:core"] != nil)
        #expect(capabilities[Self.vapidCapability] == nil, "\(capabilities.keys)")
        let keys: [String: Any] = [
            "p256dh": "BE7o7aMCSrjdNR3zh6Iom4JBKbTIka1mSPhCgRfZhGtHVqr0-E0q7ATvs0kH5l2SlDlgVGtT62fRW7iGget9y5w",
            "auth": "AAECAwQFBgcICQoLDA0ODw",
        ]
        let responses = try await jmap(
            cluster, token: token,
            [
                [
                    "PushSubscription/set",
                    ["create": ["a": ["deviceClientId": "d", "url": "https://push.example.com/x", "keys": keys]]],
                    "s",
                ],
                ["PushSubscription/get", ["ids": NSNull()], "g"],
            ])
        let set = try #require(arguments(responses, "PushSubscription/set", id: "s"), "\(responses)")
        #expect((set["notCreated"] as? [String: Any])?["a"] != nil, "\(set)")
        let get = try #require(arguments(responses, "PushSubscription/get", id: "g"), "\(responses)")
        #expect((get["list"] as? [Any])?.isEmpty == true, "\(get)")
    }

    @Test func aKeylessSubscriptionIsAcceptedWhenUnencryptedPushIsAllowed() async throws {
        let cluster = try await Cluster.start(
            accounts: ["alice"], mailboxdArguments: ["--jmap-push-allow-unencrypted"], webpush: true)
        let token = try await cluster.login("alice")
        let browser = try await browserSubscription(cluster, key: try await vapidKey(cluster, token: token))
        let responses = try await jmap(
            cluster, token: token,
            [
                [
                    "PushSubscription/set",
                    ["create": ["keyless": ["deviceClientId": "d-keyless", "url": browser.endpoint]]], "s",
                ]
            ])
        let set = try #require(arguments(responses, "PushSubscription/set", id: "s"), "\(responses)")
        #expect(set["notCreated"] == nil || set["notCreated"] is NSNull, "\(set)")
        let created = try #require(set["created"] as? [String: [String: Any]], "\(set)")
        #expect(created["keyless"]?["id"] is String)
    }
}
