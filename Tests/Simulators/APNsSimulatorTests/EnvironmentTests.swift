import APNsSimulator
import Foundation
import TestSupport
import Testing

/// Two provider listeners, production and sandbox: a token is accepted only on its own environment's
/// listener, as Apple's two gateways behave.
@Suite("Environments")
struct EnvironmentTests {
    @Test func aTokenIsAcceptedOnlyOnItsOwnEnvironmentsListener() async throws {
        let harness = try await SimulatorHarness(sandbox: true)
        let production = try await harness.registerDevice(environment: "production")
        let sandbox = try await harness.registerDevice(environment: "sandbox")
        let productionStream = try await harness.openStream(production)
        let sandboxStream = try await harness.openStream(sandbox)

        let right = try await harness.push(to: production)
        let crossed = try await harness.push(to: production, sandbox: true)
        let sandboxRight = try await harness.push(to: sandbox, sandbox: true)
        let sandboxCrossed = try await harness.push(to: sandbox)
        let productionEvents = await waitForEvents(productionStream, count: 1)
        let sandboxEvents = await waitForEvents(sandboxStream, count: 1)
        let log = try await harness.log()
        let ports = (harness.server.providerPort, harness.server.sandboxPort)
        productionStream.stop(signal: SIGKILL)
        sandboxStream.stop(signal: SIGKILL)
        await harness.stop()

        #expect(ports.1 != 0 && ports.1 != ports.0)
        #expect(right.status == 200)
        #expect(sandboxRight.status == 200)
        #expect(crossed.status == 400 && crossed.reason == "BadDeviceToken")
        #expect(sandboxCrossed.status == 400 && sandboxCrossed.reason == "BadDeviceToken")
        #expect(productionEvents.count == 1 && sandboxEvents.count == 1, "only the accepted pushes are delivered")
        // Apple's development gateway names each accepted notification for its delivery log; production doesn't.
        let uniqueID = try #require(sandboxRight.headers["apns-unique-id"])
        #expect(UUID(uuidString: uniqueID) != nil && uniqueID == uniqueID.lowercased())
        #expect(right.headers["apns-unique-id"] == nil)
        #expect(crossed.headers["apns-unique-id"] == nil)
        let environments = log.map { $0["environment"] as? String }
        #expect(environments == ["production", "sandbox", "sandbox", "production"])
    }

    @Test func developmentIsTheSandbox() async throws {
        let harness = try await SimulatorHarness(sandbox: true)
        let token = try await harness.registerDevice(environment: "development")
        let onSandbox = try await harness.push(to: token, sandbox: true)
        let listed = try await harness.control("GET", "/sim/devices")
        await harness.stop()
        #expect(onSandbox.status == 200)
        let devices = try #require(listed.json["devices"] as? [[String: Any]])
        #expect(devices.first?["environment"] as? String == "sandbox")
    }

    @Test func withoutASandboxListenerOneListenerServesBoth() async throws {
        let harness = try await SimulatorHarness()
        let production = try await harness.registerDevice(environment: "production")
        let sandbox = try await harness.registerDevice(environment: "sandbox")
        let first = try await harness.push(to: production)
        let second = try await harness.push(to: sandbox)
        let log = try await harness.log()
        let sandboxPort = harness.server.sandboxPort
        await harness.stop()
        #expect(sandboxPort == 0)
        #expect(first.status == 200 && second.status == 200)
        #expect(log.allSatisfy { $0["environment"] == nil })
    }

    @Test func theGoAwayFaultCountsEachListenersConnectionsApart() {
        // Each listener numbers its connections from 1: production's connection 1 is not sandbox's.
        let gateway = APNsGateway(configuration: APNsGatewayConfiguration(faults: APNsFaults(goAwayAfterStreams: 2)))
        func goAway(_ environment: APNsEnvironment) -> Bool {
            gateway.handle(
                APNsProviderRequest(method: "POST", path: "/3/device/ab", connectionID: 1, environment: environment)
            ).goAway
        }
        let first = goAway(.production)
        let otherListener = goAway(.sandbox)
        let second = goAway(.production)
        #expect(!first && !otherListener, "one stream on each listener's connection 1")
        #expect(second, "the second stream on production's connection 1")
    }

    @Test func registrationRefusesAnUnknownEnvironment() async throws {
        let harness = try await SimulatorHarness(sandbox: true)
        let result = try await harness.control(
            "POST", "/sim/devices", body: #"{"topic":"com.example.mail","environment":"staging"}"#)
        await harness.stop()
        #expect(result.status == 400)
        #expect(result.json["error"] as? String == "invalidRequest")
    }
}
