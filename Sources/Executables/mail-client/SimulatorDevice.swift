import Foundation
import HTTPClient
import JSONText
import MailSync
import MailSyncHTTP
import OpenSSLCrypto

/// The device side of a push simulator (apns-sim; fcm-sim for an Android device; webpush-sim for a browser):
/// registering a simulated device and receiving its signals as Server-Sent Events.
struct SimulatorDevice: Sendable {
    /// Which simulator, and what the device registers as there.
    enum Kind: Sendable {
        /// apns-sim: an app's topic and an environment.
        case apns(topic: String, environment: String)
        /// fcm-sim: an Android package and its Firebase project.
        case fcm(app: String, project: String)
        /// webpush-sim: a browser-like subscription whose keys the device holds, as a browser does, for the
        /// server's VAPID key.
        case webpush(WebPushReceiver)
    }

    let baseURL: String
    let client: HTTPClient
    let kind: Kind

    /// Why talking to the simulator failed.
    struct Failure: Error, CustomStringConvertible {
        var status: Int?
        var description: String
    }

    /// The simulator's name for the device (what its message stream is under) and, for Web Push, the
    /// subscription's endpoint.
    struct Registration: Sendable {
        var token: String
        var endpoint: String?
    }

    init(baseURL: String, client: HTTPClient, kind: Kind) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.client = client
        self.kind = kind
    }

    /// Registers the simulator's device with mailboxd (`POST /v1/devices` in the service's form).
    func registerWithServer(
        _ registration: Registration, transport: MailAPIClient
    ) async throws -> DeviceRegistration {
        switch kind {
        case .apns(let topic, let environment):
            try await transport.registerDevice(token: registration.token, topic: topic, environment: environment)
        case .fcm(let app, _):
            try await transport.registerFCMDevice(token: registration.token, app: app)
        case .webpush(let receiver):
            try await transport.registerWebPushSubscription(
                endpoint: registration.endpoint ?? "", p256dh: receiver.publicKey, auth: Base64URL.encode(receiver.auth)
            )
        }
    }

    /// `POST /sim/devices` → a new device token (APNs) or registration token (FCM); `POST /sim/subscriptions` → a
    /// subscription (Web Push) made for the server's VAPID key with the device's own keys.
    func register() async throws -> Registration {
        let fields: JSONValue
        let path: String
        switch kind {
        case .apns(let topic, let environment):
            (path, fields) = ("/sim/devices", ["topic": .string(topic), "environment": .string(environment)])
        case .fcm(let app, let project):
            (path, fields) = ("/sim/devices", ["app": .string(app), "project": .string(project)])
        case .webpush(let receiver):
            let applicationServerKey = try await receiver.applicationServerKey()
            (path, fields) = (
                "/sim/subscriptions",
                [
                    "applicationServerKey": .string(applicationServerKey),
                    "keys": ["p256dh": .string(receiver.publicKey), "auth": .string(Base64URL.encode(receiver.auth))],
                ]
            )
        }
        let body = Data(fields.jsonBytes)
        let response: HTTPClient.Response
        do {
            response = try await client.execute(
                HTTPClient.Request(
                    method: .post, url: baseURL + path, headers: ["Content-Type": "application/json"], body: body))
        } catch let error as HTTPClientError {
            throw Failure(description: "cannot reach the push simulator: \(error)")
        }
        let object = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        guard response.status == 201 || response.status == 200, let object else {
            throw Failure(status: response.status, description: "device registration failed (\(response.status))")
        }
        switch kind {
        case .apns:
            guard let token = object["deviceToken"] as? String else { break }
            return Registration(token: token)
        case .fcm:
            guard let token = object["token"] as? String else { break }
            return Registration(token: token)
        case .webpush:
            guard let id = object["id"] as? String,
                let endpoint = (object["subscription"] as? [String: Any])?["endpoint"] as? String
            else { break }
            return Registration(token: id, endpoint: endpoint)
        }
        throw Failure(status: response.status, description: "the simulator's answer has no device token")
    }

    /// The device's message stream (`…/notifications` of apns-sim, `…/messages` of fcm-sim and webpush-sim);
    /// throws for a status other than 200.
    func notifications(token: String) async throws -> HTTPClient.StreamingResponse {
        let path: String
        switch kind {
        case .apns: path = "/sim/devices/\(token)/notifications"
        case .fcm: path = "/sim/devices/\(token)/messages"
        case .webpush: path = "/sim/subscriptions/\(token)/messages"
        }
        let response: HTTPClient.StreamingResponse
        do {
            response = try await client.stream(
                HTTPClient.Request(url: baseURL + path, headers: ["Accept": "text/event-stream"]))
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

/// A browser's half of a Web Push subscription: the P-256 key and auth secret its messages are encrypted to
/// (kept on the device, never given to the push service), and where the server's VAPID key comes from.
struct WebPushReceiver: Sendable {
    let key: P256PrivateKey
    let auth: [UInt8]
    /// Base64url of the key's 65-byte point (`p256dh`).
    let publicKey: String
    let applicationServerKey: @Sendable () async throws -> String

    init(applicationServerKey: @escaping @Sendable () async throws -> String) throws {
        key = try P256PrivateKey()
        auth = SecureRandom.bytes(16)
        publicKey = Base64URL.encode(try key.publicKey.rawRepresentation)
        self.applicationServerKey = applicationServerKey
    }

    /// The plaintext of an `aes128gcm` body encrypted to this subscription.
    func decrypt(_ body: [UInt8]) throws(WebPushEncryption.DecryptionError) -> WebPushEncryption.Decrypted {
        try WebPushEncryption.decrypt(body, receiverKey: key, authSecret: auth)
    }
}

/// One signal as a simulator delivers it. apns-sim: `{"apnsId","pushType","priority","collapseId","payload"}`;
/// fcm-sim: `{"messageId","data","priority","collapseKey","ttl"}`, whose `data` holds the signal's fields as
/// strings; webpush-sim: `{"body","bodyBytes","ttl","urgency","topic"}`, whose `body` (base64url) the device
/// decrypts to the JSON signal.
struct SimulatorNotification {
    /// The fields printed in the `signal` event.
    var fields: [(String, EventField)]
    /// The payload (APNs), data (FCM) or decrypted signal (Web Push).
    var payload: JSONValue
    /// The `st` key: the tag of the state the signal announces.
    var state: String?
    /// The badge, when the signal has one.
    var badge: Int?

    init?(json: String, kind: SimulatorDevice.Kind) {
        guard let object = JSONValue.parse(Data(json.utf8)), object.object != nil else { return nil }
        func string(_ key: String) -> EventField { object[key]?.string.map(EventField.string) ?? .null }
        func int(_ key: String) -> EventField { object[key]?.int.map { EventField.int(Int($0)) } ?? .null }
        switch kind {
        case .apns:
            guard let payload = object["payload"], payload.object != nil else { return nil }
            self.payload = payload
            badge = payload["aps"]?["badge"]?.int.map { Int($0) }
            fields = [
                ("apnsId", string("apnsId")), ("pushType", string("pushType")), ("priority", int("priority")),
                ("collapseId", string("collapseId")),
            ]
        case .fcm:
            guard let data = object["data"], data.object != nil else { return nil }
            payload = data
            badge = data["badge"]?.string.flatMap { Int($0) }
            fields = [
                ("service", .string("fcm")), ("messageId", string("messageId")), ("priority", string("priority")),
                ("collapseKey", string("collapseKey")),
            ]
        case .webpush(let receiver):
            guard let body = object["body"]?.string.flatMap({ Base64URL.decode($0) }),
                let decrypted = try? receiver.decrypt(body),
                let signal = JSONValue.parse(Data(decrypted.plaintext)), signal.object != nil
            else { return nil }
            payload = signal
            badge = signal["badge"]?.int.map { Int($0) }
            fields = [
                ("service", .string("webpush")), ("bodyBytes", .int(body.count)), ("ttl", int("ttl")),
                ("urgency", string("urgency")), ("topic", string("topic")),
            ]
        }
        state = payload["st"]?.string
    }
}
