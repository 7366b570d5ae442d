import Foundation
import HTTPClient
import TestSupport
import Testing

/// mailboxd and apns-sim as real processes on loopback, talked to over real TLS.
@Suite(.serialized) struct SignalThenFetchTests {
    static let allowedTopLevel: Set<String> = ["aps", "acct", "st"]
    static let allowedAPS: Set<String> = ["badge", "content-available"]

    @Test func deliveryReachesTheDeviceAsAContentFreeSignal() async throws {
        let cluster = try await Cluster.start()
        let session = try await cluster.login("alice")
        let token = try await cluster.registerDevice(session: session)
        let stream = try await cluster.notifications(token)
        // Registration itself signals the current state; wait for it, then deliver.
        _ = await stream.waitFor(count: 1)
        let before = stream.payloads.count

        let subject = "Quarterly numbers \(UUID().uuidString)"
        let sender = "cfo-\(UUID().uuidString.prefix(8))@example.com"
        let body = "Confidential body \(UUID().uuidString)"
        let receipt = try await cluster.deliver(to: "alice", from: sender, subject: subject, body: body)
        let payloads = await stream.waitFor(count: before + 1)
        let signal = try #require(payloads.last, "no signal: \(cluster.mailboxd.errorOutput)")
        #expect(Set(signal.keys).isSubset(of: Self.allowedTopLevel))
        let aps = try #require(signal["aps"] as? [String: Any])
        #expect(Set(aps.keys).isSubset(of: Self.allowedAPS))
        #expect(aps["content-available"] as? Int == 1)
        #expect(aps["badge"] as? Int == 1)
        // `st` is the tag of the new state under the device's key: it names the state without counting changes.
        let state = try #require(receipt["state"] as? String)
        #expect(signal["st"] as? String == cluster.tag(of: state, device: token))
        #expect(!(signal["st"] as? String ?? "").contains(state.split(separator: "-")[0]), "no epoch in the signal")

        // The gateway saw no content: nothing of the subject, sender, body or username in its log.
        let log = try await cluster.call(.get, cluster.sim + "/sim/log")
        let text = String(decoding: log.data, as: UTF8.self)
        #expect(log.status == 200 && !text.isEmpty)
        for secret in [subject, sender, body, "alice"] { #expect(!text.contains(secret)) }

        // And the client fetches what changed over its own TLS connection.
        let changes = try await cluster.call(
            .get, cluster.api + "/v1/changes?since=\(state.split(separator: "-")[0])-0", token: session)
        #expect(changes.status == 200)
        let created = try #require(changes.body["created"] as? [[String: Any]])
        #expect(created.first?["subject"] as? String == subject)

        // The store's writer shows in the metrics: the account, the device and the delivery were committed.
        let metrics = String(decoding: try await cluster.call(.get, cluster.metrics).data, as: UTF8.self)
        func total(_ name: String) -> Double? {
            metrics.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap {
                Double($0.split(separator: " ")[1])
            }
        }
        #expect(metrics.contains("# TYPE mailboxd_store_transactions_total counter"))
        let transactions = try #require(total("mailboxd_store_transactions_total"))
        let writes = try #require(total("mailboxd_store_writes_total"))
        #expect(transactions >= 1 && writes >= 3 && writes >= transactions)
        #expect(try #require(total("mailboxd_store_commit_seconds_total")) > 0)
    }

    @Test func everyEndpointIsScopedToTheTokensAccount() async throws {
        let cluster = try await Cluster.start()
        let alice = try await cluster.login("alice")
        let bob = try await cluster.login("bob")
        let id = try #require(
            try await cluster.deliver(to: "alice", subject: "private", body: "for alice")["id"] as? String)
        let aliceDevice = try await cluster.registerDevice(session: alice)
        let api = cluster.api
        #expect(try await cluster.call(.get, api + "/v1/messages/\(id)", token: bob).status == 404)
        #expect(
            try await cluster.call(.patch, api + "/v1/messages/\(id)", token: bob, json: ["seen": true]).status == 404)
        #expect(try await cluster.call(.delete, api + "/v1/messages/\(id)", token: bob).status == 404)
        #expect(try await cluster.call(.delete, api + "/v1/devices/\(aliceDevice)", token: bob).status == 404)
        let listing = try await cluster.call(.get, api + "/v1/messages", token: bob)
        #expect((listing.body["messages"] as? [Any])?.isEmpty == true)
        let message = try await cluster.call(.get, api + "/v1/messages/\(id)", token: alice)
        #expect(message.status == 200 && message.body["seen"] as? Bool == false)
    }

    @Test func revokedTokensStopWorking() async throws {
        let cluster = try await Cluster.start()
        let session = try await cluster.login("alice")
        #expect(try await cluster.call(.get, cluster.api + "/v1/mailboxes", token: session).status == 200)
        #expect(try await cluster.call(.delete, cluster.api + "/v1/session", token: session).status == 204)
        let after = try await cluster.call(.get, cluster.api + "/v1/mailboxes", token: session)
        #expect(after.status == 401)
        #expect(after.body["error"] as? String == "unauthorized")
    }

    @Test func aDeviceDeletedAtTheGatewayIsRemovedFromMailboxd() async throws {
        let cluster = try await Cluster.start()
        let session = try await cluster.login("alice")
        let token = try await cluster.registerDevice(session: session)
        let stream = try await cluster.notifications(token)
        _ = await stream.waitFor(count: 1)
        #expect(try await cluster.call(.delete, cluster.sim + "/sim/devices/\(token)").status == 204)
        _ = try await cluster.deliver(to: "alice", subject: "after uninstall", body: "x")
        // mailboxd gets 410 Unregistered and drops the registration; deleting it again finds nothing.
        let gone = try await eventually {
            try await cluster.call(.delete, cluster.api + "/v1/devices/\(token)", token: session).status == 404
        }
        #expect(gone, "the device is still registered: \(cluster.mailboxd.errorOutput)")
    }

    @Test("a delivery is stored whole whether answered on the server's thread (small) or in a task (large)")
    func deliveriesOfEachSize() async throws {
        let cluster = try await Cluster.start()
        let session = try await cluster.login("alice")
        for size in [10, 200 << 10] {
            let body = String(repeating: "signal then fetch ", count: size / 18 + 1)
            let receipt = try await cluster.deliver(to: "alice", subject: "\(size)", body: body)
            let id = try #require(receipt["id"] as? String)
            #expect((receipt["state"] as? String)?.isEmpty == false)
            let message = try await cluster.call(.get, cluster.api + "/v1/messages/\(id)", token: session)
            #expect(message.status == 200)
            #expect(message.body["subject"] as? String == "\(size)")
            #expect(message.body["body"] as? String == body)
        }
    }

    @Test func badInputGetsClearFourHundreds() async throws {
        let cluster = try await Cluster.start()
        let session = try await cluster.login("alice")
        let api = cluster.api
        let big = Data(repeating: 0x61, count: 2 << 20)
        // A well-behaved client announces the body and waits: the server refuses it before it is sent.
        let tooLarge = try await cluster.call(
            .post, api + "/v1/deliveries", token: cluster.deliveryToken, raw: big,
            extraHeaders: [("Expect", "100-continue")])
        #expect(tooLarge.status == 413)
        let invalid = try await cluster.call(.post, api + "/v1/devices", token: session, raw: Data("{nope".utf8))
        #expect(invalid.status == 400 && invalid.body["error"] as? String == "invalidJSON")
        let wrongType = try await cluster.call(
            .post, api + "/v1/devices", token: session, json: ["token": 5, "topic": "t", "environment": "sandbox"])
        #expect(wrongType.status == 400 && wrongType.body["message"] != nil)
        let unknown = try await cluster.call(
            .patch, api + "/v1/messages/x", token: session, json: ["seen": true, "subject": "hack"])
        #expect(unknown.status == 400 && unknown.body["error"] as? String == "unknownField")
        let malformed = try await cluster.call(.get, api + "/v1/changes?since=%00garbage", token: session)
        #expect(malformed.status == 400 && malformed.body["error"] as? String == "invalidState")
        let foreign = try await cluster.call(.get, api + "/v1/changes?since=0123456789abcdef-3", token: session)
        #expect(foreign.status == 400 && foreign.body["error"] as? String == "cannotCalculateChanges")
        #expect(try await cluster.call(.put, api + "/v1/changes", token: session).status == 405)
        #expect(try await cluster.call(.get, api + "/v1/mailboxes").status == 401)
        #expect(try await cluster.call(.get, api + "/v1/mailboxes", token: "forged").status == 401)
        let badDelivery = try await cluster.call(
            .post, api + "/v1/deliveries", token: "wrong",
            json: ["to": "alice", "from": "a", "subject": "s", "body": "b"])
        #expect(badDelivery.status == 401)
        let nobody = try await cluster.call(
            .post, api + "/v1/deliveries", token: cluster.deliveryToken,
            json: ["to": "nobody", "from": "a", "subject": "s", "body": "b"])
        #expect(nobody.status == 404 && nobody.body["error"] as? String == "unknownRecipient")
        let folded = try await cluster.call(
            .post, api + "/v1/deliveries", token: cluster.deliveryToken,
            json: ["to": "alice", "from": "a", "subject": "s\r\nBcc: x", "body": "b"])
        #expect(folded.status == 400 && folded.body["error"] as? String == "invalidArgument")
        let notJSON = try await cluster.call(
            .post, api + "/v1/deliveries", token: cluster.deliveryToken, raw: Data("{nope".utf8))
        #expect(notJSON.status == 400 && notJSON.body["error"] as? String == "invalidJSON")
        // Failed logins are throttled per username.
        var statuses: [Int] = []
        for _ in 0..<7 {
            statuses.append(
                try await cluster.call(
                    .post, api + "/v1/session", json: ["username": "bob", "password": "wrong-password"]
                ).status)
        }
        #expect(statuses.prefix(5).allSatisfy { $0 == 401 })
        #expect(statuses.last == 429)
        // The server kept serving through all of it, and never logged the secrets it was sent.
        #expect(try await cluster.call(.get, api + "/healthz").status == 200)
        #expect(!cluster.mailboxd.errorOutput.contains("wrong-password"))
    }
}
