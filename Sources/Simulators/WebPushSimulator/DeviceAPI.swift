import Foundation
import HTTPServer
import JSONText
import OpenSSLCrypto
import SimulatorSupport

/// The device side of webpush-sim (HTTP/1.1, JSON): the simulated browser's subscriptions and message streams,
/// the control API, the capture log, health and metrics. Bad input gets a 4xx with `{"error","message"}` and
/// changes nothing.
enum DeviceAPI {
    static func router(for gateway: WebPushGateway, batch: EventStreamBatch? = nil) -> Router {
        var router = Router()
        router.post("/sim/subscriptions") { request in
            let body = try request.decodeJSON(SubscribeJSON.self, allowedFields: ["applicationServerKey", "keys"])
            guard let text = body.applicationServerKey, let key = Base64URL.decode(text), key.count == 65,
                (try? P256PublicKey(rawRepresentation: key)) != nil
            else {
                throw HTTPError.invalidRequest(
                    "'applicationServerKey' must be a base64url uncompressed P-256 point (65 bytes).")
            }
            let created: WebPushCreatedSubscription
            if let keys = body.keys {
                guard Set(keys.keys) == ["p256dh", "auth"], let p256dh = keys["p256dh"].flatMap(Base64URL.decode),
                    p256dh.count == 65, (try? P256PublicKey(rawRepresentation: p256dh)) != nil
                else {
                    throw HTTPError.invalidRequest(
                        "'keys' must be {\"p256dh\": a base64url P-256 point, \"auth\": 16 base64url bytes}.")
                }
                guard let auth = keys["auth"].flatMap(Base64URL.decode), auth.count == 16 else {
                    throw HTTPError.invalidRequest("'keys.auth' must be 16 bytes, base64url.")
                }
                do {
                    created = try gateway.subscribe(applicationServerKey: key, deviceKeys: p256dh, auth: auth)
                } catch {
                    throw HTTPError.invalidRequest("'keys' or 'applicationServerKey' is not usable.")
                }
            } else {
                do {
                    created = try gateway.subscribe(applicationServerKey: key)
                } catch {
                    throw HTTPError.invalidRequest("'applicationServerKey' is not a point on P-256.")
                }
            }
            let object: JSONValue = [
                "id": .string(created.id),
                "subscription": [
                    "endpoint": .string(created.endpoint), "expirationTime": nil,
                    "keys": ["p256dh": .string(created.p256dh), "auth": .string(created.auth)],
                ],
            ]
            return .json(data: Data(object.jsonBytes), status: .created)
        }
        router.get("/sim/subscriptions") { _ in
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return try .json(["subscriptions": gateway.subscriptions()], encoder: encoder)
        }
        router.get("/sim/subscriptions/:id/messages") { request in
            try subscribe(request.parameter("id") ?? "", gateway: gateway, batch: batch)
        }
        router.delete("/sim/subscriptions/:id") { request in
            let id = request.parameter("id") ?? ""
            guard gateway.unsubscribe(id) else { throw unknownSubscription(id, gateway: gateway) }
            return .empty()
        }
        router.put("/sim/subscriptions/:id/online") { request in
            let id = request.parameter("id") ?? ""
            let body = try request.decodeJSON(DeviceOnlineJSON.self, allowedFields: DeviceOnlineJSON.fields)
            guard gateway.setOnline(body.online, for: id) else { throw unknownSubscription(id, gateway: gateway) }
            return try .json(body)
        }
        router.put("/sim/subscriptions/:id/error") { request in
            let id = request.parameter("id") ?? ""
            let body = try request.decodeJSON(ScriptedErrorJSON.self, allowedFields: ["status", "count", "retryAfter"])
            let scripted = try body.scripted()
            guard gateway.scriptError(scripted, for: id) else { throw unknownSubscription(id, gateway: gateway) }
            return try .json(body)
        }
        router.delete("/sim/subscriptions/:id/error") { request in
            let id = request.parameter("id") ?? ""
            guard gateway.clearScriptedError(for: id) else { throw unknownSubscription(id, gateway: gateway) }
            return .empty()
        }
        router.addControlRoutes(for: gateway)
        return router
    }

    private static func subscribe(
        _ id: String, gateway: WebPushGateway, batch: EventStreamBatch?
    ) throws -> HTTPResponse {
        guard gateway.status(of: id) == .active else { throw unknownSubscription(id, gateway: gateway) }
        return try .deviceStream(
            batch: batch, connect: { gateway.connect(id, sink: $0) },
            refused: {
                HTTPError(
                    .conflict, code: "notSimulated",
                    message: "This subscription belongs to a Mozilla-protocol browser; its messages go to its socket.")
            },
            disconnect: { gateway.disconnect(id, streamID: $0) })
    }

    static func unknownSubscription(_ id: String, gateway: WebPushGateway) -> HTTPError {
        if gateway.status(of: id) == .deleted {
            return HTTPError(.gone, code: "unsubscribed", message: "The subscription was deleted.")
        }
        return HTTPError.notFound("No subscription with this id.")
    }

    private struct SubscribeJSON: Decodable {
        var applicationServerKey: String?
        /// A device's own `p256dh` and `auth` (it holds the private key); absent, the sim makes the keys.
        var keys: [String: String]?
    }

    /// `PUT /sim/subscriptions/{id}/error`.
    struct ScriptedErrorJSON: Codable {
        var status: Int
        var count: Int?
        var retryAfter: Int?

        func scripted() throws(HTTPError) -> WebPushScriptedError {
            guard (400...599).contains(status) else {
                throw .invalidRequest("'status' must be an HTTP error status (400–599).")
            }
            if let count, count < 1 {
                throw .invalidRequest("'count' must be at least 1 (leave it out for every push).")
            }
            if let retryAfter, !(0...86_400).contains(retryAfter) {
                throw .invalidRequest("'retryAfter' must be 0 to 86400 seconds.")
            }
            return WebPushScriptedError(status: status, count: count, retryAfter: retryAfter)
        }
    }
}
