import Foundation
import HTTPServer
import SimulatorSupport

/// The device side of the simulator (HTTP/1.1, JSON): registration, notification streams, the capture
/// log, health and metrics.
enum DeviceAPI {
    /// `batch` defers the wake-ups of notification streams while one of its scopes is open.
    static func router(for gateway: APNsGateway, batch: EventStreamBatch? = nil) -> Router {
        var router = Router()
        router.post("/sim/devices") { request in try register(request, gateway: gateway) }
        router.get("/sim/devices/:token/notifications") { request in
            try subscribe(request.parameter("token") ?? "", gateway: gateway, batch: batch)
        }
        router.delete("/sim/devices/:token") { request in
            let token = request.parameter("token") ?? ""
            guard gateway.unregisterDevice(token) else { throw unknownDevice(token, gateway: gateway) }
            return .empty()
        }
        ControlAPI.add(to: &router, gateway: gateway)
        router.addControlRoutes(for: gateway)
        return router
    }

    private struct Registration: Decodable {
        var topic: String?
        var environment: String?
    }

    private static func register(_ request: HTTPRequest, gateway: APNsGateway) throws -> HTTPResponse {
        let body = try request.decodeJSON(Registration.self)
        guard let topic = body.topic, PushRequestParser.isValidTopic(topic) else {
            throw HTTPError.invalidRequest("\"topic\" must be a bundle identifier.")
        }
        guard let environment = APNsEnvironment(name: body.environment ?? "sandbox") else {
            throw HTTPError.invalidRequest("\"environment\" must be \"sandbox\" or \"production\".")
        }
        let token = gateway.registerDevice(topic: topic, environment: environment)
        return try .json(["deviceToken": token], status: .created)
    }

    private static func subscribe(
        _ token: String, gateway: APNsGateway, batch: EventStreamBatch?
    ) throws -> HTTPResponse {
        guard case .active = gateway.status(of: token) else { throw unknownDevice(token, gateway: gateway) }
        return try .deviceStream(
            batch: batch, connect: { gateway.connect(token, sink: $0) },
            refused: { unknownDevice(token, gateway: gateway) },
            disconnect: { gateway.disconnect(token, streamID: $0) })
    }

    static func unknownDevice(_ token: String, gateway: APNsGateway) -> HTTPError {
        if case .unregistered = gateway.status(of: token) {
            return HTTPError(.gone, code: "unregistered", message: "The device was deleted.")
        }
        return HTTPError.notFound("No device with this token.")
    }
}
