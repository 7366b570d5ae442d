import FCMSimulator
import Foundation
import SimulatorSupport
import TestSupport
import Testing

/// The device and control API of an in-process server (h2c provider, HTTP/1.1 device side), with curl.
@Suite struct DeviceAPITests {
    final class Server: Sendable {
        let server: FCMSimulatorServer
        let curl: String
        let directory: TemporaryDirectory

        init() throws {
            curl = try requireTool("curl")
            directory = try TemporaryDirectory(prefix: "fcm-device-api")
            let account = TestServiceAccount(project: GatewayHarness.project)
            server = FCMSimulatorServer(
                configuration: FCMSimulatorConfiguration(
                    providerPort: 0, devicePort: 0, gateway: FCMGatewayConfiguration(serviceAccounts: [account.account])
                ))
            try server.start()
        }

        func call(_ method: String, _ path: String, _ body: String? = nil) async throws -> (Int, [String: Any]) {
            var arguments = [
                "-s", "-X", method, "-w", "\n%{http_code}", "http://127.0.0.1:\(server.devicePort)\(path)",
            ]
            if let body { arguments += ["--data-binary", body] }
            let result = try await runTool(curl, arguments)
            let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            let json = try? JSONSerialization.jsonObject(with: Data(lines.dropLast().joined(separator: "\n").utf8))
            return (Int(lines.last ?? "") ?? 0, json as? [String: Any] ?? [:])
        }
    }

    @Test func devicesAreRegisteredListedAndUninstalled() async throws {
        let api = try Server()
        let (status, body) = try await api.call(
            "POST", "/sim/devices", #"{"app":"com.example.mail","project":"\#(GatewayHarness.project)"}"#)
        #expect(status == 201)
        let token = try #require(body["token"] as? String)
        #expect(token.count >= 152)
        #expect(token.contains(":APA91b"))
        let list = try await api.call("GET", "/sim/devices")
        let devices = try #require(list.1["devices"] as? [[String: Any]])
        #expect(devices.count == 1)
        #expect(devices.first?["token"] as? String == token)
        #expect(devices.first?["app"] as? String == "com.example.mail")
        #expect(devices.first?["project"] as? String == GatewayHarness.project)
        #expect(devices.first?["online"] as? Bool == true)
        #expect(devices.first?["delivered"] as? Int == 0)
        #expect(devices.first?["stored"] as? Int == 0)
        #expect(try await api.call("PUT", "/sim/devices/\(token)/online", #"{"online":false}"#).0 == 200)
        #expect(api.server.gateway.devices().first?.online == false)
        #expect(try await api.call("DELETE", "/sim/devices/\(token)").0 == 204)
        #expect(try await api.call("GET", "/sim/devices/\(token)/messages").0 == 410)
        #expect(try await api.call("DELETE", "/sim/devices/\(token)").0 == 410)
        #expect(try await api.call("GET", "/healthz").1["status"] as? String == "ok")
        let metrics = try await runTool(api.curl, ["-s", "http://127.0.0.1:\(api.server.devicePort)/metrics"]).stdout
        #expect(metrics.contains("fcm_sim_registered_devices 0"))
        await api.server.shutdown()
    }

    @Test func badInputGets4xxWithErrorAndMessage() async throws {
        let api = try Server()
        let token = try #require(
            api.server.gateway.registerDevice(app: "com.example.mail", project: GatewayHarness.project))
        let cases: [(String, String, String?, Int)] = [
            ("POST", "/sim/devices", #"{"app":"not a package","project":"\#(GatewayHarness.project)"}"#, 400),
            ("POST", "/sim/devices", #"{"app":"com.example.mail","project":"unknown"}"#, 400),
            ("POST", "/sim/devices", #"{"app":"com.example.mail"}"#, 400),
            ("POST", "/sim/devices", #"{"app":"com.example.mail","project":"p","extra":1}"#, 400),
            ("POST", "/sim/devices", "not json", 400),
            ("PUT", "/sim/faults", #"{"drop":2}"#, 400),
            ("PUT", "/sim/faults", #"{"drop":0.6,"status503":0.6}"#, 400),
            ("PUT", "/sim/faults", #"{"latencyMs":-1}"#, 400),
            ("PUT", "/sim/faults", #"{"goawayAfter":1}"#, 400),
            ("PUT", "/sim/devices/\(token)/error", #"{"status":404,"errorCode":"NOPE"}"#, 400),
            ("PUT", "/sim/devices/\(token)/error", #"{"status":200,"errorCode":"UNREGISTERED"}"#, 400),
            ("PUT", "/sim/devices/\(token)/error", #"{"status":404,"errorCode":"UNREGISTERED","count":0}"#, 400),
            ("PUT", "/sim/devices/\(token)/error", #"{"errorCode":"UNREGISTERED"}"#, 400),
            ("PUT", "/sim/devices/nobody/error", #"{"status":404,"errorCode":"UNREGISTERED"}"#, 404),
            ("DELETE", "/sim/devices/nobody/error", nil, 404),
            ("PUT", "/sim/devices/\(token)/online", #"{"online":"yes"}"#, 400),
            ("PUT", "/sim/devices/nobody/online", #"{"online":true}"#, 404),
            ("GET", "/sim/devices/nobody/messages", nil, 404),
            ("GET", "/sim/log?after=-1", nil, 400),
            ("PATCH", "/sim/faults", "{}", 405),
        ]
        for (method, path, body, expected) in cases {
            let (status, json) = try await api.call(method, path, body)
            #expect(status == expected, "\(method) \(path) \(body ?? "")")
            #expect(json["error"] is String, "\(method) \(path)")
            #expect(json["message"] is String, "\(method) \(path)")
        }
        // Nothing changed.
        #expect(api.server.gateway.faults == SimulatorFaults())
        #expect(api.server.gateway.devices().count == 1)

        let faults = try await api.call(
            "PUT", "/sim/faults", #"{"drop":0.1,"status429":0.2,"status503":0.3,"latencyMs":5,"seed":9}"#)
        #expect(faults.0 == 200)
        #expect(faults.1["seed"] as? Int == 9)
        #expect(api.server.gateway.faults.status503Probability == 0.3)
        #expect(api.server.gateway.faults.latency == .milliseconds(5))
        let scripted = try await api.call(
            "PUT", "/sim/devices/\(token)/error",
            #"{"status":429,"errorCode":"QUOTA_EXCEEDED","retryAfter":3,"count":2}"#)
        #expect(scripted.0 == 200)
        #expect(try await api.call("DELETE", "/sim/devices/\(token)/error").0 == 204)
        #expect(try await api.call("DELETE", "/sim/log").0 == 204)
        let log = try await runTool(api.curl, ["-s", "http://127.0.0.1:\(api.server.devicePort)/sim/log"])
        #expect(log.stdout == "[]")
        await api.server.shutdown()
    }

    @Test func aStreamGetsWhatWasStoredWhileOffline() async throws {
        let api = try Server()
        let harnessAccount = TestServiceAccount(project: GatewayHarness.project)
        let token = try #require(
            api.server.gateway.registerDevice(app: "com.example.mail", project: GatewayHarness.project))
        let grant = api.server.gateway.handle(
            SimulatorProviderRequest(
                method: "POST", path: "/token", headers: [],
                body: Data(
                    ("grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion="
                        + (try harnessAccount.assertion()))
                        .utf8)))
        let access = try #require(grant.json?["access_token"] as? String)
        let send = api.server.gateway.handle(
            SimulatorProviderRequest(
                method: "POST", path: "/v1/projects/\(GatewayHarness.project)/messages:send",
                headers: [("Authorization", "Bearer \(access)")],
                body: Data(#"{"message":{"token":"\#(token)","data":{"acct":"a9"}}}"#.utf8)))
        #expect(send.status == 200)
        #expect(api.server.gateway.devices().first?.stored == 1)
        let stream = try ChildProcess(
            api.curl, ["-sN", "http://127.0.0.1:\(api.server.devicePort)/sim/devices/\(token)/messages"],
            logDirectory: api.directory.url.path)
        defer { stream.stop(signal: SIGKILL) }
        let events = await waitForMessages(stream, count: 1)
        #expect(events.first?["data"] as? [String: String] == ["acct": "a9"])
        #expect(events.first?["priority"] as? String == "normal")
        #expect(api.server.gateway.devices().first?.delivered == 1)
        await api.server.shutdown()
    }
}
