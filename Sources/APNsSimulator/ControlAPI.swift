import Durations
import Foundation
import HTTPServer
import SimulatorSupport

/// The control API on the device listener: what another team's integration test calls to steer the
/// simulator — faults, scripted answers per device, devices held offline, the device list, a cleared log.
/// Bad input gets a 4xx with `{"error","message"}` and changes nothing.
enum ControlAPI {
    static func add(to router: inout Router, gateway: Gateway) {
        router.get("/sim/faults") { _ in try .json(FaultsJSON(gateway.faults)) }
        router.put("/sim/faults") { request in
            let faults = try request.decodeJSON(FaultsJSON.self, allowedFields: FaultsJSON.fields).configuration()
            gateway.setFaults(faults)
            return try .json(FaultsJSON(faults))
        }
        router.put("/sim/devices/:token/error") { request in
            let token = request.parameter("token") ?? ""
            let body = try request.decodeJSON(ScriptedErrorJSON.self, allowedFields: ["status", "reason", "count"])
            let reason = try body.rejection()
            guard gateway.scriptError(reason, count: body.count, for: token) else {
                throw DeviceAPI.unknownDevice(token, gateway: gateway)
            }
            return try .json(body)
        }
        router.delete("/sim/devices/:token/error") { request in
            let token = request.parameter("token") ?? ""
            guard gateway.clearScriptedError(for: token) else { throw DeviceAPI.unknownDevice(token, gateway: gateway) }
            return .empty()
        }
        router.put("/sim/devices/:token/online") { request in
            let token = request.parameter("token") ?? ""
            let body = try request.decodeJSON(OnlineJSON.self, allowedFields: ["online"])
            guard gateway.setOnline(body.online, for: token) else {
                throw DeviceAPI.unknownDevice(token, gateway: gateway)
            }
            return try .json(body)
        }
        router.get("/sim/devices") { _ in
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            return try .json(["devices": gateway.devices()], encoder: encoder)
        }
        router.delete("/sim/log") { _ in
            gateway.clearLog()
            return .empty()
        }
    }

    /// `PUT /sim/faults`: every field optional, an absent one meaning no such fault.
    struct FaultsJSON: Codable {
        static let fields: Set<String> = ["drop", "status429", "status503", "latencyMs", "goawayAfter", "seed"]
        var drop: Double?
        var status429: Double?
        var status503: Double?
        var latencyMs: Int?
        var goawayAfter: Int?
        var seed: UInt64?

        init(_ faults: FaultConfiguration) {
            drop = faults.dropProbability
            status429 = faults.tooManyRequestsProbability
            status503 = faults.serviceUnavailableProbability
            latencyMs = Int(faults.latency.wholeMilliseconds)
            goawayAfter = faults.goAwayAfterStreams ?? 0
            seed = faults.seed
        }

        /// Every field always appears in answers (`seed` as `null` when none was set).
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(drop ?? 0, forKey: .drop)
            try container.encode(status429 ?? 0, forKey: .status429)
            try container.encode(status503 ?? 0, forKey: .status503)
            try container.encode(latencyMs ?? 0, forKey: .latencyMs)
            try container.encode(goawayAfter ?? 0, forKey: .goawayAfter)
            try container.encode(seed, forKey: .seed)
        }

        func configuration() throws(HTTPError) -> FaultConfiguration {
            try FaultRequest.check(drop: drop, status429: status429, status503: status503, latencyMs: latencyMs)
            if let goawayAfter, goawayAfter < 0 {
                throw .invalidRequest("'goawayAfter' must be 0 (never) or a positive number of streams.")
            }
            return FaultConfiguration(
                dropProbability: drop ?? 0, tooManyRequestsProbability: status429 ?? 0,
                serviceUnavailableProbability: status503 ?? 0, seed: seed,
                goAwayAfterStreams: (goawayAfter ?? 0) > 0 ? goawayAfter : nil, latency: .milliseconds(latencyMs ?? 0))
        }
    }

    /// `PUT /sim/devices/{token}/error`.
    struct ScriptedErrorJSON: Codable {
        var status: Int
        var reason: String
        var count: Int?

        /// The reason, checked against Apple's list and the status APNs answers it with.
        func rejection() throws(HTTPError) -> RejectionReason {
            guard let reason = RejectionReason(rawValue: reason) else {
                throw .invalidRequest("'reason' must be one of APNs's reasons, e.g. BadDeviceToken or Unregistered.")
            }
            guard status == reason.status else {
                throw .invalidRequest("APNs answers \(reason.rawValue) with status \(reason.status), not \(status).")
            }
            if let count, count < 1 {
                throw .invalidRequest("'count' must be at least 1 (leave it out for every send).")
            }
            return reason
        }
    }

    /// `PUT /sim/devices/{token}/online`.
    struct OnlineJSON: Codable {
        var online: Bool
    }
}
