import Foundation
import HTTPClient

/// The device side of a push simulator (apns-sim, or fcm-sim for an Android device): registering a simulated
/// device and receiving its signals as Server-Sent Events.
struct SimulatorDevice: Sendable {
    /// Which simulator, and what the device registers as there.
    enum Kind: Sendable {
        /// apns-sim: an app's topic and an environment.
        case apns(topic: String, environment: String)
        /// fcm-sim: an Android package and its Firebase project.
        case fcm(app: String, project: String)
    }

    let baseURL: String
    let client: HTTPClient
    let kind: Kind

    /// Why talking to the simulator failed.
    struct Failure: Error, CustomStringConvertible {
        var status: Int?
        var description: String
    }

    init(baseURL: String, client: HTTPClient, kind: Kind) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.client = client
        self.kind = kind
    }

    /// The `POST /v1/devices` body that registers the simulator's `token` with mailboxd.
    func serverRegistration(token: String) -> [String: String] {
        switch kind {
        case .apns(let topic, let environment): ["token": token, "topic": topic, "environment": environment]
        case .fcm(let app, _): ["service": "fcm", "token": token, "app": app]
        }
    }

    /// `POST /sim/devices` → a new device token (APNs) or registration token (FCM).
    func register() async throws -> String {
        let fields: [String: String]
        let tokenKey: String
        switch kind {
        case .apns(let topic, let environment):
            (fields, tokenKey) = (["topic": topic, "environment": environment], "deviceToken")
        case .fcm(let app, let project):
            (fields, tokenKey) = (["app": app, "project": project], "token")
        }
        let body = try JSONSerialization.data(withJSONObject: fields)
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
            let token = object[tokenKey] as? String
        else { throw Failure(status: response.status, description: "device registration failed (\(response.status))") }
        return token
    }

    /// `GET /sim/devices/{token}/notifications` (apns-sim) or `…/messages` (fcm-sim) as a stream; throws for a
    /// status other than 200.
    func notifications(token: String) async throws -> HTTPStreamingResponse {
        let path: String
        switch kind {
        case .apns: path = "notifications"
        case .fcm: path = "messages"
        }
        let response: HTTPStreamingResponse
        do {
            response = try await client.stream(
                HTTPRequest(
                    url: baseURL + "/sim/devices/\(token)/\(path)", headers: ["Accept": "text/event-stream"]))
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

/// One signal as a simulator delivers it. apns-sim: `{"apnsId","pushType","priority","collapseId","payload"}`;
/// fcm-sim: `{"messageId","data","priority","collapseKey","ttl"}`, whose `data` holds the signal's fields as
/// strings.
struct SimulatorNotification {
    /// The fields printed in the `signal` event.
    var fields: [(String, JSONValue)]
    /// The payload (APNs) or data (FCM).
    var payload: [String: Any]
    /// The `st` key: the tag of the state the signal announces.
    var state: String?
    /// The badge, when the signal has one.
    var badge: Int?

    init?(json: String, kind: SimulatorDevice.Kind) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else {
            return nil
        }
        func string(_ key: String) -> JSONValue { (object[key] as? String).map(JSONValue.string) ?? .null }
        switch kind {
        case .apns:
            guard let payload = object["payload"] as? [String: Any] else { return nil }
            self.payload = payload
            badge = ((payload["aps"] as? [String: Any])?["badge"] as? NSNumber)?.intValue
            fields = [
                ("apnsId", string("apnsId")), ("pushType", string("pushType")),
                ("priority", (object["priority"] as? NSNumber).map { JSONValue.int($0.intValue) } ?? .null),
                ("collapseId", string("collapseId")),
            ]
        case .fcm:
            guard let data = object["data"] as? [String: Any] else { return nil }
            payload = data
            badge = (data["badge"] as? String).flatMap { Int($0) }
            fields = [
                ("service", .string("fcm")), ("messageId", string("messageId")), ("priority", string("priority")),
                ("collapseKey", string("collapseKey")),
            ]
        }
        state = payload["st"] as? String
    }
}
