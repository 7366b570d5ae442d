import Durations
import Foundation
import HTTPServer
import SimulatorSupport

/// The control API on the device listener: what another team's integration test calls to steer the
/// simulator — faults, scripted answers per device, devices held offline, the device list, a cleared log.
/// Bad input gets a 4xx with `{"error","message"}` and changes nothing.
enum ControlAPI {
    static func add(to router: inout Router, gateway: APNsGateway) {
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
            let body = try request.decodeJSON(DeviceOnlineJSON.self, allowedFields: DeviceOnlineJSON.fields)
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
        router.addLogRoutes {
            gateway.logEntries(after: $0, limit: $1)
        } clear: {
            gateway.clearLog()
        }
    }

    /// `PUT /sim/faults`: the fields every simulator shares (``SimulatorFaultsJSON``) and `goawayAfter`, each
    /// optional, an absent one meaning no such fault; answers show every field.
    struct FaultsJSON: Codable {
        static let fields = SimulatorFaultsJSON.fields.union(["goawayAfter"])
        var common: SimulatorFaultsJSON
        var goawayAfter: Int?

        private enum CodingKeys: String, CodingKey {
            case goawayAfter
        }

        init(_ faults: APNsFaults) {
            common = SimulatorFaultsJSON(faults.common)
            goawayAfter = faults.goAwayAfterStreams ?? 0
        }

        init(from decoder: any Decoder) throws {
            common = try SimulatorFaultsJSON(from: decoder)
            goawayAfter = try decoder.container(keyedBy: CodingKeys.self).decodeIfPresent(
                Int.self, forKey: .goawayAfter)
        }

        func encode(to encoder: any Encoder) throws {
            try common.encode(to: encoder)
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(goawayAfter ?? 0, forKey: .goawayAfter)
        }

        func configuration() throws(HTTPError) -> APNsFaults {
            let common = try common.faults()
            if let goawayAfter, goawayAfter < 0 {
                throw .invalidRequest("'goawayAfter' must be 0 (never) or a positive number of streams.")
            }
            return APNsFaults(common, goAwayAfterStreams: (goawayAfter ?? 0) > 0 ? goawayAfter : nil)
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
}
