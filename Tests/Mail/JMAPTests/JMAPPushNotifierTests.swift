import Durations
import Foundation
import JMAP
import JSONText
import Locking
import MailboxStore
import Push
import TestSupport
import Testing

/// A push service that records what it is asked to send and answers from a script (``PushOutcome/delivered``
/// once the script runs out); a URL holding `refused` is refused as the endpoint policy refuses one.
final class RecordingSubscriptionPush: SubscriptionPushService {
    struct Sent: Sendable, Equatable {
        var message: SubscriptionPushMessage
        var url: String
        var keys: String
        var topic: String
    }

    private let state = LockedValue<(sent: [Sent], script: [PushOutcome])>(([], []))

    func checkSubscription(url: String, keys: (p256dh: String, auth: String)?) throws(RegistrationError) -> String {
        if url.contains("refused") { throw RegistrationError("invalidEndpoint", "The endpoint is on a loopback host.") }
        return keys.map { "\($0.p256dh).\($0.auth)" } ?? ""
    }

    func push(_ message: SubscriptionPushMessage, url: String, keys: String, topic: String) async -> PushOutcome {
        state.withLock { state in
            state.sent.append(Sent(message: message, url: url, keys: keys, topic: topic))
            return state.script.isEmpty ? .delivered : state.script.removeFirst()
        }
    }

    var sent: [Sent] { state.withLock { $0.sent } }
    func script(_ outcomes: PushOutcome...) { state.withLock { $0.script += outcomes } }

    /// Waits until `count` messages were sent; returns them all.
    func waitForCount(_ count: Int) async -> [Sent] {
        _ = await eventually { sent.count >= count }
        return sent
    }

    /// Waits until what was sent satisfies `predicate`; returns it all.
    func waitFor(_ predicate: ([Sent]) -> Bool) async -> [Sent] {
        _ = await eventually { predicate(sent) }
        return sent
    }
}

/// PushSubscription/get and /set (RFC 8620 §7.2) and the StateChanges that follow commits, on both engines, with
/// a recording push service: verification first, nothing before the code comes back, then one StateChange per
/// change naming only the types asked for that changed.
@Suite struct JMAPPushNotifierTests {
    struct Setup {
        let fixture: JMAPFixture
        let service = RecordingSubscriptionPush()
        let server: JMAPServer
        let notifier: JMAPPushNotifier

        init(_ engine: JMAPEngine, allowsUnencrypted: Bool = false) async throws {
            fixture = try await JMAPFixture(engine)
            var configuration = JMAPPushNotifier.Configuration()
            configuration.allowsUnencrypted = allowsUnencrypted
            configuration.sweepInterval = .milliseconds(50)
            notifier = JMAPPushNotifier(store: fixture.store, service: service, configuration: configuration)
            server = JMAPServer(store: fixture.store, push: notifier, applicationServerKey: "BKey")
        }

        /// One call of a core method (no `accountId`) as alice.
        func call(_ name: String, _ arguments: JSONValue) async throws -> (name: String, arguments: JSONValue) {
            let body: JSONValue = [
                "using": [.string(JMAPCapability.core)], "methodCalls": [[.string(name), arguments, "c0"]],
            ]
            let response = try await server.handle(
                Data(body.json.utf8), account: fixture.alice, baseURL: JMAPFixture.baseURL
            ).get()
            let first = try #require(response["methodResponses"]?.array?.first?.array)
            return (try #require(first[0].string), first[1])
        }

        func create(_ properties: JSONValue) async throws -> JSONValue {
            try await call("PushSubscription/set", ["create": ["k1": properties]]).arguments
        }

        static let keys: JSONValue = ["p256dh": "BPoint", "auth": "AuthSecret"]
    }

    @Test(arguments: JMAPEngine.allCases) func aVerifiedSubscriptionHearsEachChangeOfTheTypesItAskedFor(
        engine: JMAPEngine
    ) async throws {
        let setup = try await Setup(engine)
        let session = setup.server.session(for: setup.fixture.alice, baseURL: JMAPFixture.baseURL)
        #expect(session["capabilities"]?[JMAPCapability.webPushVAPID]?["applicationServerKey"] == "BKey")

        let far = "2030-01-01T00:00:00Z"  // past the longest lifetime on the test clock (2027)
        let created = try await setup.create([
            "deviceClientId": "phone", "url": "https://push.example.test/s/1", "keys": Setup.keys,
            "types": ["Email", "Thread"], "expires": .string(far),
        ])
        let id = try #require(created["created"]?["k1"]?["id"]?.string)
        let expires = try #require(created["created"]?["k1"]?["expires"]?.string)
        #expect(expires < far)  // capped at the longest lifetime

        // The verification goes first, to the URL, encrypted to the keys given.
        let first = await setup.service.waitForCount(1)
        guard case .verification(let subscriptionID, let code)? = first.first?.message else {
            Issue.record("no PushVerification: \(first)")
            return
        }
        #expect(subscriptionID == id)
        #expect(first[0].url == "https://push.example.test/s/1" && first[0].keys == "BPoint.AuthSecret")

        // Nothing but the verification until the code comes back: this change is never pushed (the next push,
        // after the code, is the next change's; the one worker would have sent this one before it).
        try await setup.fixture.deliver(to: setup.fixture.alice)
        let wrong = try await setup.call(
            "PushSubscription/set", ["update": [id: ["verificationCode": "nope"]]])
        #expect(wrong.arguments["notUpdated"]?[id]?["type"] == "invalidProperties")
        #expect(wrong.arguments["notUpdated"]?[id]?["properties"] == ["verificationCode"])
        let right = try await setup.call(
            "PushSubscription/set", ["update": [id: ["verificationCode": .string(code)]]])
        #expect(right.arguments["updated"]?.object?.keys.contains(id) == true)

        // A delivery: Email and Thread (EmailDelivery and Mailbox were not asked for), the states /get reports.
        let delivered = try await setup.fixture.deliver(to: setup.fixture.alice, subject: "Second")
        let afterDelivery = await setup.service.waitForCount(2)
        let states = try await setup.server.typeStates(accountID: setup.fixture.alice.id)
        #expect(afterDelivery.count == 2, "a push for the change made before the code came back: \(afterDelivery)")
        #expect(
            afterDelivery.last?.message
                == .stateChange(
                    accountID: setup.fixture.alice.jmapID,
                    states: ["Email": states.states["Email"]!, "Thread": states.states["Thread"]!]))
        #expect(afterDelivery.last?.topic == afterDelivery.first?.topic)

        // A flag change changes Email but not Thread.
        try await setup.fixture.store.updateMessage(id: delivered, accountID: setup.fixture.alice.id, seen: true)
        let afterFlag = await setup.service.waitForCount(3)
        let flagged = try await setup.server.typeStates(accountID: setup.fixture.alice.id)
        #expect(
            afterFlag.last?.message
                == .stateChange(accountID: setup.fixture.alice.jmapID, states: ["Email": flagged.states["Email"]!]))

        // Another account's changes are not this subscription's: after bob's delivery, the next push is alice's
        // next change.
        try await setup.fixture.deliver(to: setup.fixture.bob)
        try await setup.fixture.store.updateMessage(id: delivered, accountID: setup.fixture.alice.id, seen: false)
        let afterOther = await setup.service.waitForCount(4)
        let unflagged = try await setup.server.typeStates(accountID: setup.fixture.alice.id)
        #expect(afterOther.count == 4, "a push for another account's change: \(afterOther)")
        #expect(
            afterOther.last?.message
                == .stateChange(accountID: setup.fixture.alice.jmapID, states: ["Email": unflagged.states["Email"]!]))

        // /get: never url or keys; the code once verified.
        let got = try await setup.call("PushSubscription/get", ["ids": .null])
        let listed = try #require(got.arguments["list"]?.array?.first)
        #expect(listed["id"]?.string == id && listed["verificationCode"]?.string == code)
        #expect(listed["deviceClientId"] == "phone" && listed["types"] == ["Email", "Thread"])
        #expect(listed["url"] == nil && listed["keys"] == nil)
        #expect(try await setup.call("PushSubscription/get", ["properties": ["url"]]).name == "error")

        // The push service says the subscription is gone: it is removed.
        setup.service.script(.dropRegistration(reason: "HTTP 410", unregisteredAt: nil))
        try await setup.fixture.deliver(to: setup.fixture.alice, subject: "Third")
        _ = await setup.service.waitForCount(5)
        #expect(
            try await eventually {
                try await setup.fixture.store.pushSubscriptions(accountID: setup.fixture.alice.id).isEmpty
            })
    }

    @Test(arguments: JMAPEngine.allCases) func creationsAreCheckedAndDestroyedSubscriptionsHearNothing(
        engine: JMAPEngine
    ) async throws {
        let setup = try await Setup(engine)
        // Keys are required by default; the property is named, the URL never echoed.
        let keyless = try await setup.create(["deviceClientId": "d", "url": "https://push.example.test/k"])
        #expect(keyless["notCreated"]?["k1"]?["type"] == "invalidProperties")
        #expect(keyless["notCreated"]?["k1"]?["properties"] == ["keys"])
        let refused = try await setup.create([
            "deviceClientId": "d", "url": "https://refused.example.test/x", "keys": Setup.keys,
        ])
        #expect(refused["notCreated"]?["k1"]?["properties"] == ["url"])
        #expect(refused["notCreated"]?["k1"]?["description"]?.string?.contains("refused.example") == false)
        for (property, value) in [
            ("types", ["Email", "Calendar"]), ("verificationCode", "guess"), ("expires", "2001-01-01T00:00:00Z"),
            ("colour", "red"),
        ] as [(String, JSONValue)] {
            var object: [String: JSONValue] = [
                "deviceClientId": "d", "url": "https://push.example.test/x", "keys": Setup.keys,
            ]
            object[property] = value
            let answer = try await setup.create(.object(object))
            #expect(answer["notCreated"]?["k1"]?["properties"] == [.string(property)], "\(property)")
        }
        #expect(setup.service.sent.isEmpty)

        let created = try await setup.create([
            "deviceClientId": "d", "url": "https://push.example.test/x", "keys": Setup.keys,
        ])
        let id = try #require(created["created"]?["k1"]?["id"]?.string)
        let immutable = try await setup.call(
            "PushSubscription/set", ["update": [id: ["url": "https://push.example.test/other"]]])
        #expect(immutable.arguments["notUpdated"]?[id]?["properties"] == ["url"])
        let destroyed = try await setup.call("PushSubscription/set", ["destroy": [.string(id), "missing"]])
        #expect(destroyed.arguments["destroyed"] == [.string(id)])
        #expect(destroyed.arguments["notDestroyed"]?["missing"]?["type"] == "notFound")
        _ = await setup.service.waitForCount(1)

        // A subscription made and verified afterwards hears the next two changes; by the second, the one worker has
        // finished every push for the first, and the destroyed subscription has heard nothing but its verification.
        let otherURL = "https://push.example.test/y"
        let other = try await setup.create(["deviceClientId": "d2", "url": .string(otherURL), "keys": Setup.keys])
        let otherID = try #require(other["created"]?["k1"]?["id"]?.string)
        guard case .verification(_, let code)? = await setup.service.waitForCount(2).last?.message else {
            Issue.record("no PushVerification for the second subscription: \(setup.service.sent)")
            return
        }
        _ = try await setup.call("PushSubscription/set", ["update": [otherID: ["verificationCode": .string(code)]]])
        func changesHeard(_ sent: [RecordingSubscriptionPush.Sent]) -> Int {
            sent.filter {
                if case .stateChange = $0.message { $0.url == otherURL } else { false }
            }.count
        }
        try await setup.fixture.deliver(to: setup.fixture.alice)
        #expect(changesHeard(await setup.service.waitFor { changesHeard($0) == 1 }) == 1)
        try await setup.fixture.deliver(to: setup.fixture.alice, subject: "Again")
        #expect(changesHeard(await setup.service.waitFor { changesHeard($0) == 2 }) == 2)
        let destroyedHeard = setup.service.sent.filter { $0.url == "https://push.example.test/x" }
        #expect(destroyedHeard.count == 1, "the verification only: \(destroyedHeard)")
    }

    @Test(arguments: JMAPEngine.allCases) func anOwedStateChangeOutlivesItsNotifierAndIsRetriedWithTheBackoff(
        engine: JMAPEngine
    ) async throws {
        let setup = try await Setup(engine)
        let created = try await setup.create([
            "deviceClientId": "phone", "url": "https://push.example.test/s/2", "keys": Setup.keys,
        ])
        let id = try #require(created["created"]?["k1"]?["id"]?.string)
        let verification = try #require(await setup.service.waitForCount(1).first)
        guard case .verification(_, let code) = verification.message else {
            Issue.record("no PushVerification: \(verification)")
            return
        }
        _ = try await setup.call("PushSubscription/set", ["update": [id: ["verificationCode": .string(code)]]])

        // The push service is down: the StateChange fails, and is owed in the store with its retry time.
        setup.service.script(.retry(reason: "HTTP 503", retryAfter: 120))
        try await setup.fixture.deliver(to: setup.fixture.alice, subject: "While down")
        #expect(await setup.service.waitForCount(2).count == 2)
        // The process dies: its notifier is gone, nothing of it is remembered but the store.
        setup.notifier.shutdown()

        // The next process's notifier sends it once the retry time (never sooner than Retry-After) has come.
        let service = RecordingSubscriptionPush()
        var configuration = JMAPPushNotifier.Configuration()
        configuration.sweepInterval = .milliseconds(50)
        let next = JMAPPushNotifier(store: setup.fixture.store, service: service, configuration: configuration)
        defer { next.shutdown() }
        setup.fixture.clock.advance(by: 121)
        let sent = await service.waitForCount(1)
        let states = try await setup.server.typeStates(accountID: setup.fixture.alice.id)
        #expect(sent.first?.message == .stateChange(accountID: setup.fixture.alice.jmapID, states: states.states))
        #expect(sent.first?.topic == verification.topic)

        // Told: the next change is the next push, and only it.
        try await setup.fixture.deliver(to: setup.fixture.alice, subject: "After")
        #expect(await service.waitForCount(2).count == 2)
        #expect(try await setup.fixture.store.claimDuePushes().isEmpty)
    }

    @Test func aSubscriptionIsSeenAndChangedOnlyWithTheCredentialsThatMadeIt() async throws {
        let setup = try await Setup(.sqlite)
        let session = try await setup.fixture.store.createSession(
            accountID: setup.fixture.alice.id, tokenHash: [UInt8](repeating: 9, count: 32), deviceName: "phone")
        var withToken = setup.fixture.alice
        withToken.sessionID = session.id
        func call(_ name: String, _ arguments: JSONValue, as account: JMAPAccount) async throws -> JSONValue {
            let body: JSONValue = [
                "using": [.string(JMAPCapability.core)], "methodCalls": [[.string(name), arguments, "c0"]],
            ]
            let response = try await setup.server.handle(
                Data(body.json.utf8), account: account, baseURL: JMAPFixture.baseURL
            ).get()
            return try #require(response["methodResponses"]?.array?.first?.array?[1])
        }
        let created = try await call(
            "PushSubscription/set",
            ["create": ["k": ["deviceClientId": "d", "url": "https://push.example.test/t", "keys": Setup.keys]]],
            as: withToken)
        let id = try #require(created["created"]?["k"]?["id"]?.string)
        // With the password (no session), the token's subscription is neither listed nor destroyable.
        #expect(try await call("PushSubscription/get", [:], as: setup.fixture.alice)["list"] == [])
        let destroy = try await call("PushSubscription/set", ["destroy": [.string(id)]], as: setup.fixture.alice)
        #expect(destroy["notDestroyed"]?[id]?["type"] == "notFound")
        #expect(try await call("PushSubscription/get", [:], as: withToken)["list"]?.array?.count == 1)
        // Signing out of that session ends the subscription.
        #expect(try await setup.fixture.store.revokeSession(id: session.id, accountID: setup.fixture.alice.id))
        #expect(try await call("PushSubscription/get", [:], as: withToken)["list"] == [])
    }

    @Test func withTheFlagAKeylessSubscriptionIsAccepted() async throws {
        let setup = try await Setup(.sqlite, allowsUnencrypted: true)
        let created = try await setup.create(["deviceClientId": "d", "url": "https://push.example.test/plain"])
        #expect(created["created"]?["k1"]?["id"]?.string != nil)
        #expect(await setup.service.waitForCount(1).first?.keys == "")
    }

    @Test func withoutAPushServiceNothingCanBeSubscribed() async throws {
        let fixture = try await JMAPFixture(.sqlite)
        let body: JSONValue = [
            "using": [.string(JMAPCapability.core)],
            "methodCalls": [
                [
                    "PushSubscription/set",
                    [
                        "create": [
                            "k1": ["deviceClientId": "d", "url": "https://push.example.test/x", "keys": Setup.keys]
                        ]
                    ], "c0",
                ]
            ],
        ]
        let response = try await fixture.server.handle(
            Data(body.json.utf8), account: fixture.alice, baseURL: JMAPFixture.baseURL
        ).get()
        let arguments = try #require(response["methodResponses"]?.array?.first?.array?[1])
        #expect(arguments["notCreated"]?["k1"]?["type"] == "forbidden")
        let session = fixture.server.session(for: fixture.alice, baseURL: JMAPFixture.baseURL)
        #expect(session["capabilities"]?[JMAPCapability.webPushVAPID] == nil)
    }
}
