import Foundation
import HTTPServer
import SimulatorSupport

/// The device side of fcm-sim (HTTP/1.1, JSON): installs, message streams, the control API, the capture
/// log, health and metrics. Bad input gets a 4xx with `{"error","message"}` and changes nothing.
enum DeviceAPI {
    static func router(for gateway: FCMGateway, batch: EventStreamBatch? = nil) -> Router {
        var router = Router()
        router.post("/sim/devices") { request in
            let body = try request.decodeJSON(Registration.self, allowedFields: ["app", "project"])
            guard let app = body.app, isPackageName(app) else {
                throw HTTPError.invalidRequest("\"app\" must be an Android package name, e.g. com.example.mail.")
            }
            guard let project = body.project, !project.isEmpty else {
                throw HTTPError.invalidRequest("\"project\" must be a Firebase project id.")
            }
            guard let token = gateway.registerDevice(app: app, project: project) else {
                throw HTTPError(
                    .badRequest, code: "unknownProject",
                    message: "No trusted service account belongs to this project.")
            }
            return try .json(["token": token], status: .created)
        }
        router.get("/sim/devices") { _ in
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            return try .json(["devices": gateway.devices()], encoder: encoder)
        }
        router.get("/sim/devices/:token/messages") { request in
            try subscribe(request.parameter("token") ?? "", gateway: gateway, batch: batch)
        }
        router.delete("/sim/devices/:token") { request in
            let token = request.parameter("token") ?? ""
            guard gateway.unregisterDevice(token) else { throw unknownDevice(token, gateway: gateway) }
            return .empty()
        }
        router.put("/sim/devices/:token/online") { request in
            let token = request.parameter("token") ?? ""
            let body = try request.decodeJSON(DeviceOnlineJSON.self, allowedFields: DeviceOnlineJSON.fields)
            guard gateway.setOnline(body.online, for: token) else { throw unknownDevice(token, gateway: gateway) }
            return try .json(body)
        }
        router.put("/sim/devices/:token/error") { request in
            let token = request.parameter("token") ?? ""
            let body = try request.decodeJSON(
                ScriptedErrorJSON.self, allowedFields: ["status", "errorCode", "count", "retryAfter"])
            let scripted = try body.scripted()
            guard gateway.scriptError(scripted, for: token) else { throw unknownDevice(token, gateway: gateway) }
            return try .json(body)
        }
        router.delete("/sim/devices/:token/error") { request in
            let token = request.parameter("token") ?? ""
            guard gateway.clearScriptedError(for: token) else { throw unknownDevice(token, gateway: gateway) }
            return .empty()
        }
        router.addControlRoutes(for: gateway)
        return router
    }

    private static func subscribe(
        _ token: String, gateway: FCMGateway, batch: EventStreamBatch?
    ) throws
        -> HTTPResponse
    {
        guard case .active = gateway.status(of: token) else { throw unknownDevice(token, gateway: gateway) }
        return try .deviceStream(
            batch: batch, connect: { gateway.connect(token, sink: $0) },
            refused: { unknownDevice(token, gateway: gateway) },
            disconnect: { gateway.disconnect(token, streamID: $0) })
    }

    static func unknownDevice(_ token: String, gateway: FCMGateway) -> HTTPError {
        if case .uninstalled = gateway.status(of: token) {
            return HTTPError(.gone, code: "uninstalled", message: "The app instance was uninstalled.")
        }
        return HTTPError.notFound("No device with this token.")
    }

    static func isPackageName(_ name: String) -> Bool {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 2, name.utf8.count <= 255 else { return false }
        return parts.allSatisfy { part in
            guard let first = part.unicodeScalars.first, ("a"..."z").contains(first) || ("A"..."Z").contains(first)
            else { return false }
            return part.unicodeScalars.allSatisfy {
                ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_"
            }
        }
    }

    private struct Registration: Decodable {
        var app: String?
        var project: String?
    }

    /// `PUT /sim/devices/{token}/error`.
    struct ScriptedErrorJSON: Codable {
        var status: Int
        var errorCode: String
        var count: Int?
        var retryAfter: Int?

        func scripted() throws(HTTPError) -> FCMScriptedError {
            guard let code = FCMErrorCode(rawValue: errorCode) else {
                let known = FCMErrorCode.allCases.map(\.rawValue).joined(separator: ", ")
                throw .invalidRequest("'errorCode' must be one of FCM's codes: \(known).")
            }
            guard (400...599).contains(status) else {
                throw .invalidRequest("'status' must be an HTTP error status (400–599).")
            }
            if let count, count < 1 {
                throw .invalidRequest("'count' must be at least 1 (leave it out for every send).")
            }
            if let retryAfter, !(0...86_400).contains(retryAfter) {
                throw .invalidRequest("'retryAfter' must be 0 to 86400 seconds.")
            }
            return FCMScriptedError(status: status, errorCode: code, count: count, retryAfter: retryAfter)
        }
    }
}
