import Foundation
import OpenSSLCrypto
import TestSupport
import Testing
import WebPushSimulator

/// The device and control API of an in-process server (h2c push resources, HTTP/1.1 device side), with curl.
@Suite struct DeviceAPITests {
    final class Server: Sendable {
        let server: WebPushSimulatorServer
        let curl: String
        let key: [UInt8]

        init() throws {
            curl = try requireTool("curl")
            key = try P256PrivateKey().publicKey.rawRepresentation
            server = WebPushSimulatorServer(
                configuration: WebPushSimulatorConfiguration(providerPort: 0, devicePort: 0))
            try server.start()
        }

        var keyText: String { Base64URL.encode(key) }

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

    @Test func subscriptionsAreMadeListedAndDeleted() async throws {
        let api = try Server()
        let (status, body) = try await api.call(
            "POST", "/sim/subscriptions", #"{"applicationServerKey":"\#(api.keyText)"}"#)
        #expect(status == 201)
        let id = try #require(body["id"] as? String)
        let subscription = try #require(body["subscription"] as? [String: Any])
        let endpoint = try #require(subscription["endpoint"] as? String)
        #expect(endpoint == "http://127.0.0.1:\(api.server.providerPort)/wpush/\(id)")
        #expect(subscription["expirationTime"] is NSNull)
        let keys = try #require(subscription["keys"] as? [String: String])
        #expect(Base64URL.decode(keys["p256dh"] ?? "")?.count == 65)
        #expect(Base64URL.decode(keys["auth"] ?? "")?.count == 16)
        let list = try await api.call("GET", "/sim/subscriptions")
        let subscriptions = try #require(list.1["subscriptions"] as? [[String: Any]])
        #expect(subscriptions.count == 1)
        #expect(subscriptions.first?["id"] as? String == id)
        #expect(subscriptions.first?["kind"] as? String == "simulated")
        #expect(subscriptions.first?["applicationServerKey"] as? String == api.keyText)
        #expect(subscriptions.first?["uniformBodyLength"] as? Bool == true)
        #expect(try await api.call("PUT", "/sim/subscriptions/\(id)/online", #"{"online":false}"#).0 == 200)
        #expect(api.server.gateway.subscriptions().first?.online == false)
        #expect(try await api.call("PUT", "/sim/subscriptions/\(id)/error", #"{"status":413,"count":1}"#).0 == 200)
        #expect(try await api.call("DELETE", "/sim/subscriptions/\(id)/error").0 == 204)
        #expect(try await api.call("DELETE", "/sim/subscriptions/\(id)").0 == 204)
        #expect(try await api.call("GET", "/sim/subscriptions/\(id)/messages").0 == 410)
        #expect(try await api.call("DELETE", "/sim/subscriptions/\(id)").0 == 410)
        #expect(try await api.call("GET", "/healthz").1["status"] as? String == "ok")
        let faults = try await api.call("PUT", "/sim/faults", #"{"drop":0.5,"seed":3}"#)
        #expect(faults.0 == 200)
        #expect(faults.1["drop"] as? Double == 0.5)
        #expect(faults.1["status503"] as? Double == 0)
        #expect(try await api.call("DELETE", "/sim/log").0 == 204)
        let metrics = try await runTool(api.curl, ["-s", "http://127.0.0.1:\(api.server.devicePort)/metrics"]).stdout
        #expect(metrics.contains("webpush_sim_subscriptions 0"))
        await api.server.shutdown()
    }

    @Test func badInputGets4xxWithErrorAndMessage() async throws {
        let api = try Server()
        let id = try api.server.gateway.subscribe(applicationServerKey: api.key).id
        var notOnCurve = api.key
        notOnCurve[64] ^= 1
        let cases: [(String, String, String?, Int)] = [
            ("POST", "/sim/subscriptions", #"{}"#, 400),
            ("POST", "/sim/subscriptions", #"{"applicationServerKey":"AAAA"}"#, 400),
            ("POST", "/sim/subscriptions", #"{"applicationServerKey":"\#(Base64URL.encode(notOnCurve))"}"#, 400),
            ("POST", "/sim/subscriptions", #"{"applicationServerKey":"not base64!"}"#, 400),
            ("POST", "/sim/subscriptions", #"{"applicationServerKey":7}"#, 400),
            ("POST", "/sim/subscriptions", #"{"applicationServerKey":"\#(api.keyText)","extra":1}"#, 400),
            ("POST", "/sim/subscriptions", "not json", 400),
            ("PUT", "/sim/faults", #"{"drop":2}"#, 400),
            ("PUT", "/sim/faults", #"{"drop":0.6,"status503":0.6}"#, 400),
            ("PUT", "/sim/faults", #"{"latencyMs":-1}"#, 400),
            ("PUT", "/sim/faults", #"{"goawayAfter":1}"#, 400),
            ("PUT", "/sim/subscriptions/\(id)/error", #"{"status":200}"#, 400),
            ("PUT", "/sim/subscriptions/\(id)/error", #"{"status":404,"count":0}"#, 400),
            ("PUT", "/sim/subscriptions/\(id)/error", #"{"status":503,"retryAfter":-1}"#, 400),
            ("PUT", "/sim/subscriptions/\(id)/error", #"{"count":1}"#, 400),
            ("PUT", "/sim/subscriptions/\(id)/online", #"{"online":"yes"}"#, 400),
            ("PUT", "/sim/subscriptions/nobody/online", #"{"online":true}"#, 404),
            ("PUT", "/sim/subscriptions/nobody/error", #"{"status":410}"#, 404),
            ("DELETE", "/sim/subscriptions/nobody/error", nil, 404),
            ("DELETE", "/sim/subscriptions/nobody", nil, 404),
            ("GET", "/sim/subscriptions/nobody/messages", nil, 404),
            ("GET", "/sim/log?after=-1", nil, 400),
            ("GET", "/sim/log?limit=x", nil, 400),
            ("GET", "/sim/nothing", nil, 404),
        ]
        for (method, path, body, expected) in cases {
            let (status, json) = try await api.call(method, path, body)
            #expect(status == expected, "\(method) \(path) \(body ?? "")")
            #expect(json["error"] is String, "\(method) \(path)")
            #expect(json["message"] is String, "\(method) \(path)")
        }
        #expect(api.server.gateway.faults == .init())
        await api.server.shutdown()
    }
}
