import Foundation
import HTTPClient

/// The device side of apns-sim: registering a simulated device and receiving its notifications as
/// Server-Sent Events.
struct SimulatorDevice: Sendable {
    let baseURL: String
    let client: HTTPClient

    /// Why talking to the simulator failed.
    struct Failure: Error, CustomStringConvertible {
        var status: Int?
        var description: String
    }

    init(baseURL: String, client: HTTPClient) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.client = client
    }

    /// `POST /sim/devices` → a new device token.
    func register(topic: String, environment: String) async throws -> String {
        let body = try JSONSerialization.data(withJSONObject: ["topic": topic, "environment": environment])
        let response: HTTPResponse
        do {
            response = try await client.execute(
                HTTPRequest(
                    method: .post, url: baseURL + "/sim/devices", headers: ["Content-Type": "application/json"],
                    body: body))
        } catch let error as HTTPClientError {
            throw Failure(description: "cannot reach the push simulator: \(error)")
        }
        guard response.status == 201 || response.status == 200,
            let object = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any],
            let token = object["deviceToken"] as? String
        else { throw Failure(status: response.status, description: "device registration failed (\(response.status))") }
        return token
    }

    /// `GET /sim/devices/{token}/notifications` as a stream; throws for a status other than 200.
    func notifications(token: String) async throws -> HTTPStreamingResponse {
        let response: HTTPStreamingResponse
        do {
            response = try await client.stream(
                HTTPRequest(
                    url: baseURL + "/sim/devices/\(token)/notifications", headers: ["Accept": "text/event-stream"]))
        } catch let error as HTTPClientError {
            throw Failure(description: "cannot reach the push simulator: \(error)")
        }
        guard response.status == 200 else {
            response.cancel()
            throw Failure(status: response.status, description: "notification stream refused (\(response.status))")
        }
        return response
    }
}

/// One notification as apns-sim delivers it: `{"apnsId","pushType","priority","collapseId","payload"}`.
struct SimulatorNotification {
    var apnsId: String?
    var pushType: String?
    var priority: Int?
    var collapseId: String?
    var payload: [String: Any]

    init?(json: String) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any],
            let payload = object["payload"] as? [String: Any]
        else { return nil }
        apnsId = object["apnsId"] as? String
        pushType = object["pushType"] as? String
        priority = (object["priority"] as? NSNumber)?.intValue
        collapseId = object["collapseId"] as? String
        self.payload = payload
    }

    /// The `st` key: the account's sync state when the signal was built.
    var state: String? { payload["st"] as? String }

    /// `aps.badge`, when present.
    var badge: Int? { ((payload["aps"] as? [String: Any])?["badge"] as? NSNumber)?.intValue }
}
