import FCMSimulator
import Foundation
import Testing

/// Android's store-and-forward rules, through the gateway with a manual clock.
@Suite struct DeviceQueueTests {
    private func send(
        _ harness: GatewayHarness, _ device: String, _ token: String, n: Int, collapseKey: String? = nil,
        ttl: String? = nil
    ) {
        var android: [String] = []
        if let collapseKey { android.append(#""collapse_key":"\#(collapseKey)""#) }
        if let ttl { android.append(#""ttl":"\#(ttl)""#) }
        let response = harness.send(
            harness.message(to: device, data: #"{"n":"\#(n)"}"#, android: "{" + android.joined(separator: ",") + "}"),
            accessToken: token)
        #expect(response.status == 200)
    }

    @Test func offlineKeepsFourCollapseKeysNewestPerKey() throws {
        let harness = GatewayHarness()
        let device = try harness.register()
        let token = try harness.accessToken()
        #expect(harness.gateway.setOnline(false, for: device))
        let sink = harness.connect(device)
        for (n, key) in ["a", "b", "a", "c", "d", "e"].enumerated() {
            harness.clock.advance(by: 1)
            send(harness, device, token, n: n, collapseKey: key)
        }
        #expect(sink.received.isEmpty)
        #expect(harness.gateway.devices().first?.stored == 4)
        #expect(harness.gateway.setOnline(true, for: device))
        // "a"'s first message was collapsed by its second; "b" (the oldest key) was pushed out by "e".
        #expect(sink.data.map { $0["n"] ?? "" } == ["2", "3", "4", "5"])
        let outcomes = harness.gateway.logEntries().filter { $0.kind == "send" }.map(\.outcome)
        #expect(outcomes == [.collapsed, .dropped, .delivered, .delivered, .delivered, .delivered])
        #expect(harness.gateway.metrics.collapsed == 1)
    }

    @Test func offlineKeepsAtMostAHundredPlainMessages() throws {
        let harness = GatewayHarness { $0.deviceRatePerMinute = nil }
        let device = try harness.register()
        let token = try harness.accessToken()
        for n in 0..<105 { send(harness, device, token, n: n) }
        #expect(harness.gateway.devices().first?.stored == 100)
        let sink = harness.connect(device)
        #expect(sink.data.count == 100)
        #expect(sink.data.first?["n"] == "5")
        #expect(sink.data.last?["n"] == "104")
        #expect(harness.gateway.metrics.dropped == 5)
    }

    @Test func ttlExpiresHeldMessagesAndZeroNeedsAReachableDevice() throws {
        let harness = GatewayHarness()
        let device = try harness.register()
        let token = try harness.accessToken()
        send(harness, device, token, n: 1, ttl: "30s")
        send(harness, device, token, n: 2, ttl: "0s")
        send(harness, device, token, n: 3, ttl: "120s")
        harness.clock.advance(by: 60)
        harness.gateway.processDueWork()
        let sink = harness.connect(device)
        #expect(sink.data.map { $0["n"] ?? "" } == ["3"])
        let outcomes = harness.gateway.logEntries().filter { $0.kind == "send" }.map(\.outcome)
        #expect(outcomes == [.expired, .dropped, .delivered])
        // TTL 0 reaches a device that is connected now.
        send(harness, device, token, n: 4, ttl: "0s")
        #expect(sink.data.last?["n"] == "4")
    }

    @Test func collapsibleThrottleIsABurstThenOnePerRefill() throws {
        let harness = GatewayHarness {
            $0.collapsibleBurst = 20
            $0.collapsibleRefillSeconds = 180
            $0.deviceRatePerMinute = nil
        }
        let device = try harness.register()
        let token = try harness.accessToken()
        let sink = harness.connect(device)
        for n in 0..<20 { send(harness, device, token, n: n, collapseKey: "k\(n)") }
        #expect(sink.data.count == 20)
        // Over the burst: delayed, not refused; a newer message with the same key replaces a held one.
        send(harness, device, token, n: 20, collapseKey: "x")
        send(harness, device, token, n: 21, collapseKey: "y")
        send(harness, device, token, n: 22, collapseKey: "x")
        #expect(sink.data.count == 20)
        #expect(harness.gateway.devices().first?.stored == 2)
        // Non-collapsible messages are not throttled.
        send(harness, device, token, n: 23)
        #expect(sink.data.last?["n"] == "23")
        harness.clock.advance(by: 179)
        harness.gateway.processDueWork()
        #expect(sink.data.count == 21)
        harness.clock.advance(by: 1)
        harness.gateway.processDueWork()
        #expect(sink.data.count == 22)
        #expect(sink.data.last?["n"] == "21")
        harness.clock.advance(by: 180)
        harness.gateway.processDueWork()
        #expect(sink.data.last?["n"] == "22")
        #expect(sink.data.count == 23)
        let outcomes = harness.gateway.logEntries().filter { $0.kind == "send" }.map(\.outcome)
        #expect(outcomes[20] == .collapsed)
        #expect(outcomes[21] == .delivered)
        #expect(outcomes[22] == .delivered)
        #expect(harness.gateway.metrics.throttled == 3)
    }

    @Test func uninstallDropsWhatWasHeld() throws {
        let harness = GatewayHarness()
        let device = try harness.register()
        let token = try harness.accessToken()
        send(harness, device, token, n: 1)
        #expect(harness.gateway.unregisterDevice(device))
        #expect(harness.gateway.logEntries().last?.outcome == .dropped)
        #expect(harness.gateway.devices().isEmpty)
        #expect(harness.gateway.status(of: device) == .uninstalled)
        #expect(harness.gateway.connect(device, sink: RecordingSink().sink) == nil)
    }
}
