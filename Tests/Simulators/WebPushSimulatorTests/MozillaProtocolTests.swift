import Foundation
import OpenSSLCrypto
import SimulatorSupport
import Testing
import WebPushSimulator

/// Mozilla's WebSocket push protocol through the gateway, with a recording transport in place of the socket.
@Suite struct MozillaProtocolTests {
    let harness: GatewayHarness
    let transport = RecordingTransport()

    init() throws {
        harness = try GatewayHarness()
        harness.gateway.setMozillaTransport(transport.transport)
    }

    func send(_ connection: UInt64, _ object: [String: Any]) throws {
        let data = try JSONSerialization.data(withJSONObject: object)
        harness.gateway.mozillaReceived(connection, String(decoding: data, as: UTF8.self))
    }

    /// hello and register on a new connection; the uaid and the endpoint.
    func helloAndRegister(
        _ connection: UInt64, uaid: String? = nil, channelID: String, key: String?
    ) throws
        -> (uaid: String, endpoint: String)
    {
        harness.gateway.mozillaOpened(connection)
        var hello: [String: Any] = ["messageType": "hello", "use_webpush": true, "broadcasts": [:]]
        if let uaid { hello["uaid"] = uaid }
        try send(connection, hello)
        var register: [String: Any] = ["messageType": "register", "channelID": channelID]
        if let key { register["key"] = key }
        try send(connection, register)
        let frames = transport.messages(connection)
        let helloAnswer = try #require(frames.first { $0["messageType"] as? String == "hello" })
        let registerAnswer = try #require(frames.last { $0["messageType"] as? String == "register" })
        #expect(helloAnswer["status"] as? Int == 200)
        #expect(helloAnswer["use_webpush"] as? Bool == true)
        #expect(registerAnswer["status"] as? Int == 200)
        #expect(registerAnswer["channelID"] as? String == channelID)
        return (try #require(helloAnswer["uaid"] as? String), try #require(registerAnswer["pushEndpoint"] as? String))
    }

    /// A subscription as the browser would hold it: its own keys.
    struct Browser {
        let key = try! P256PrivateKey()
        let auth = SecureRandom.bytes(16)
        var created: WebPushCreatedSubscription {
            WebPushCreatedSubscription(
                id: "", endpoint: "", p256dh: Base64URL.encode(try! key.publicKey.rawRepresentation),
                auth: Base64URL.encode(auth))
        }
    }

    func push(
        _ text: String, endpoint: String, browser: Browser, _ changes: [String: String?] = [:]
    ) throws
        -> SimulatorProviderResponse
    {
        var target = browser.created
        target.endpoint = endpoint
        return harness.push(to: target, try harness.encrypt(text, for: target), headers: try harness.headers(changes))
    }

    @Test func helloRegisterNotificationAckAndRedeliveryOnTheNextHello() throws {
        let channel = UUID().uuidString.lowercased()
        // Firefox sends the key base64url with padding.
        let paddedKey = Data(harness.server.publicKey).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        let (uaid, endpoint) = try helloAndRegister(1, channelID: channel, key: paddedKey)
        #expect(uaid.count == 32)
        #expect(endpoint.hasPrefix(GatewayHarness.base + "/wpush/"))
        let browser = Browser()
        #expect(try push("first", endpoint: endpoint, browser: browser, ["ttl": "300"]).status == 201)
        let notification = try #require(transport.messages(1).last)
        #expect(notification["messageType"] as? String == "notification")
        #expect(notification["channelID"] as? String == channel)
        #expect(notification["headers"] as? [String: String] == ["encoding": "aes128gcm"])
        #expect(notification["ttl"] as? Int == 300)
        let text = try #require(notification["data"] as? String)
        let data = try #require(Base64URL.decode(text))
        let decrypted = try WebPushEncryption.decrypt(data, receiverKey: browser.key, authSecret: browser.auth)
        #expect(String(decoding: decrypted.plaintext, as: UTF8.self) == "first")
        let version = try #require(notification["version"] as? String)
        #expect(harness.lastEntry()?.outcome == .delivered)
        #expect(harness.lastEntry()?.layout?.paddingLength == nil)

        // Not acknowledged: the next hello of the uaid (another socket) gets it again, the old socket is closed.
        #expect(try push("second", endpoint: endpoint, browser: browser).status == 201)
        harness.gateway.mozillaClosed(1)
        _ = try helloAndRegister(2, uaid: uaid, channelID: channel, key: paddedKey)
        let again = transport.messages(2).filter { $0["messageType"] as? String == "notification" }
        #expect(again.map { $0["version"] as? String }.first == version)
        #expect(again.count == 2)
        try send(
            2,
            [
                "messageType": "ack",
                "updates": again.map {
                    ["channelID": channel, "version": $0["version"] as? String ?? "", "code": 100]
                },
            ])
        #expect(harness.gateway.logEntries().map(\.outcome) == [.acknowledged, .acknowledged])
        harness.gateway.mozillaClosed(2)
        _ = try helloAndRegister(3, uaid: uaid, channelID: channel, key: paddedKey)
        #expect(!transport.messages(3).contains { $0["messageType"] as? String == "notification" })
        #expect(harness.gateway.metrics.acknowledged == 2)
    }

    @Test func messagesForADisconnectedUserAreKeptAndTTLZeroIsDropped() throws {
        let channel = UUID().uuidString.lowercased()
        let (uaid, endpoint) = try helloAndRegister(1, channelID: channel, key: harness.server.publicKeyText)
        harness.gateway.mozillaClosed(1)
        let browser = Browser()
        #expect(try push("kept", endpoint: endpoint, browser: browser).status == 201)
        #expect(try push("gone", endpoint: endpoint, browser: browser, ["ttl": "0"]).status == 201)
        #expect(harness.gateway.logEntries().map(\.outcome) == [.stored, .dropped])
        _ = try helloAndRegister(2, uaid: uaid, channelID: channel, key: harness.server.publicKeyText)
        let notifications = transport.messages(2).filter { $0["messageType"] as? String == "notification" }
        #expect(notifications.count == 1)
    }

    @Test func anotherSocketOfTheSameUaidClosesTheFirst() throws {
        let channel = UUID().uuidString.lowercased()
        let (uaid, _) = try helloAndRegister(1, channelID: channel, key: nil)
        _ = try helloAndRegister(2, uaid: uaid, channelID: channel, key: nil)
        #expect(transport.closeStatus(1) == 4000)
        #expect(transport.closeStatus(2) == nil)
    }

    @Test func unregisterMakesLaterPushes410() throws {
        let channel = UUID().uuidString.lowercased()
        let (_, endpoint) = try helloAndRegister(1, channelID: channel, key: harness.server.publicKeyText)
        try send(1, ["messageType": "unregister", "channelID": channel, "code": 200])
        let answer = try #require(transport.messages(1).last)
        #expect(answer["messageType"] as? String == "unregister")
        #expect(answer["status"] as? Int == 200)
        #expect(try push("late", endpoint: endpoint, browser: Browser()).status == 410)
    }

    @Test func aKeyedChannelNeedsVAPIDWithThatKeyAnUnkeyedOneDoesNot() throws {
        let keyed = try helloAndRegister(
            1, channelID: UUID().uuidString.lowercased(), key: harness.server.publicKeyText)
        let unkeyed = try helloAndRegister(2, channelID: UUID().uuidString.lowercased(), key: nil)
        let browser = Browser()
        #expect(try push("x", endpoint: keyed.endpoint, browser: browser, ["authorization": nil]).status == 401)
        #expect(try push("x", endpoint: unkeyed.endpoint, browser: browser, ["authorization": nil]).status == 201)
        let stranger = try ApplicationServer().authorization(audience: GatewayHarness.base, now: harness.clock.now())
        #expect(try push("x", endpoint: keyed.endpoint, browser: browser, ["authorization": stranger]).status == 403)
        #expect(try push("x", endpoint: unkeyed.endpoint, browser: browser, ["authorization": stranger]).status == 201)
    }

    @Test func ackCodesNacksAndBadLayoutsAreLogged() throws {
        let channel = UUID().uuidString.lowercased()
        let (_, endpoint) = try helloAndRegister(1, channelID: channel, key: nil)
        let browser = Browser()
        for text in ["a", "b"] { #expect(try push(text, endpoint: endpoint, browser: browser).status == 201) }
        let versions = transport.messages(1).filter { $0["messageType"] as? String == "notification" }
            .compactMap { $0["version"] as? String }
        try send(
            1,
            [
                "messageType": "ack",
                "updates": [
                    ["channelID": channel, "version": versions[0], "code": 101],
                    ["channelID": channel, "version": versions[1], "code": 100],
                ],
            ])
        try send(1, ["messageType": "nack", "version": versions[1], "code": 301])
        let entries = harness.gateway.logEntries()
        #expect(entries.map(\.outcome) == [.undecryptable, .clientError])
        #expect(entries[1].events.map(\.outcome) == [.delivered, .acknowledged, .clientError])
        var target = browser.created
        target.endpoint = endpoint
        #expect(harness.push(to: target, Data(repeating: 1, count: 120), headers: try harness.headers()).status == 201)
        #expect(harness.lastEntry()?.outcome == .undecryptable)
        #expect(transport.messages(1).filter { $0["messageType"] as? String == "notification" }.count == 2)
    }

    @Test func pingsAreAnsweredAndProtocolErrorsClose() throws {
        harness.gateway.mozillaOpened(1)
        harness.gateway.mozillaReceived(1, "{}")
        #expect(transport.messages(1).count == 1)
        #expect(transport.messages(1).first?.isEmpty == true)
        // Register before hello.
        try send(1, ["messageType": "register", "channelID": UUID().uuidString])
        #expect(transport.closeStatus(1) == 1002)
        harness.gateway.mozillaOpened(2)
        harness.gateway.mozillaReceived(2, "not json")
        #expect(transport.closeStatus(2) == 1002)
        // A bad channel id or key is refused without closing.
        _ = try helloAndRegister(3, channelID: UUID().uuidString.lowercased(), key: nil)
        try send(3, ["messageType": "register", "channelID": "not-a-uuid"])
        #expect(transport.messages(3).last?["status"] as? Int == 400)
        try send(3, ["messageType": "register", "channelID": UUID().uuidString.lowercased(), "key": "AAAA"])
        #expect(transport.messages(3).last?["status"] as? Int == 400)
        #expect(transport.closeStatus(3) == nil)
        // Firefox's broadcast subscription is ignored.
        try send(3, ["messageType": "broadcast_subscribe", "broadcasts": ["remote-settings/monitor_changes": "\"0\""]])
        #expect(transport.closeStatus(3) == nil)
    }
}
