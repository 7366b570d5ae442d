import Durations
import Foundation
import HTTPServer
import SimulatorSupport

/// apns-sim's own control routes on the device listener, beside those every simulator answers (faults, the capture
/// log, health: `Router.addControlRoutes(for:)`): what another team's integration test calls to script a device's
/// answers, hold a device offline and list the devices. Bad input gets a 4xx with `{"error","message"}` and changes
/// nothing.
enum ControlAPI {
    static func add(to router: inout Router, gateway: APNsGateway) {
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
