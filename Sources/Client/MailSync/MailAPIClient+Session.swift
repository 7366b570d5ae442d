import Foundation

/// A session opened by `POST /v1/session`.
public struct MailSession: Sendable, Equatable, Codable {
    /// The bearer token for later calls.
    public var accessToken: String
    /// The account's identifier.
    public var accountId: String

    /// Creates a session value.
    public init(accessToken: String, accountId: String) {
        self.accessToken = accessToken
        self.accountId = accountId
    }

    /// Decodes a session; `accountId` may be a JSON string or number.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        accessToken = try container.decode(String.self, forKey: .accessToken)
        if let number = try? container.decode(Int64.self, forKey: .accountId) {
            accountId = String(number)
        } else {
            accountId = try container.decode(String.self, forKey: .accountId)
        }
    }
}

/// A device registration made by `POST /v1/devices`.
public struct DeviceRegistration: Sendable, Equatable, Codable {
    /// The device's id on the server (`DELETE /v1/devices/{id}`), when the server gives one.
    public var id: String?
    /// The push service (`apns`, `fcm`, `webpush`).
    public var service: String?
    /// The push service's address registered: the APNs or FCM token, or the Web Push endpoint.
    public var token: String
    /// The opaque alias the server will put in the signals' `acct` key.
    public var alias: String?
    /// The device's signal key (base64url, 32 bytes): signals carry the tag of a state under it.
    public var signalKey: String?

    /// Creates a registration.
    public init(
        id: String? = nil, service: String? = nil, token: String, alias: String? = nil, signalKey: String? = nil
    ) {
        self.id = id
        self.service = service
        self.token = token
        self.alias = alias
        self.signalKey = signalKey
    }

    private enum CodingKeys: String, CodingKey {
        case id, service, token, endpoint, alias, signalKey
    }

    /// Reads the answer: the address is `token` (APNs, FCM) or `endpoint` (Web Push).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decodeIfPresent(String.self, forKey: .id)
        service = try container.decodeIfPresent(String.self, forKey: .service)
        token =
            try container.decodeIfPresent(String.self, forKey: .token)
            ?? container.decode(String.self, forKey: .endpoint)
        alias = try container.decodeIfPresent(String.self, forKey: .alias)
        signalKey = try container.decodeIfPresent(String.self, forKey: .signalKey)
    }

    /// Writes the fields as the server names them (`token`).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(id, forKey: .id)
        try container.encodeIfPresent(service, forKey: .service)
        try container.encode(token, forKey: .token)
        try container.encodeIfPresent(alias, forKey: .alias)
        try container.encodeIfPresent(signalKey, forKey: .signalKey)
    }
}

/// The receipt of `POST /v1/deliveries`.
public struct DeliveryReceipt: Sendable, Equatable, Codable {
    /// The new message's identifier.
    public var id: String
    /// The recipient's state after the delivery.
    public var state: String
}

/// A message to deliver with `POST /v1/deliveries`.
public struct OutgoingMessage: Sendable, Equatable, Codable {
    /// The recipient's username.
    public var to: String
    /// The sender address.
    public var from: String
    /// The subject.
    public var subject: String
    /// The body.
    public var body: String

    /// Creates a message.
    public init(to: String, from: String, subject: String, body: String) {
        self.to = to
        self.from = from
        self.subject = subject
        self.body = body
    }
}

extension MailAPIClient {
    /// `POST /v1/session`: logs in and keeps the access token for later calls.
    ///
    /// Wrong credentials throw `.server(status: 401, code: "invalidCredentials", …)`; throttling throws
    /// `.server(status: 429, …)` with the `Retry-After` delay.
    @discardableResult
    public func login(username: String, password: String, deviceName: String) async throws -> MailSession {
        struct Body: Encodable {
            var username: String
            var password: String
            var deviceName: String
        }
        let body = try JSONEncoder().encode(Body(username: username, password: password, deviceName: deviceName))
        let response = try await send("POST", "/v1/session", body: body, bearer: "", endpoint: "session")
        let session = try decode(MailSession.self, response, endpoint: "session")
        accessToken = session.accessToken
        return session
    }

    /// `DELETE /v1/session`: ends the session and forgets the token.
    public func logout() async throws {
        _ = try await send("DELETE", "/v1/session", endpoint: "session")
        accessToken = nil
    }

    /// `POST /v1/devices`: registers a push device token for this account.
    @discardableResult
    public func registerDevice(token: String, topic: String, environment: String) async throws -> DeviceRegistration {
        try await registerDevice(["token": token, "topic": topic, "environment": environment])
    }

    /// `POST /v1/devices` for an FCM device: its registration token and Android package name.
    public func registerFCMDevice(token: String, app: String) async throws -> DeviceRegistration {
        try await registerDevice(["service": "fcm", "token": token, "app": app])
    }

    /// `POST /v1/devices` for a browser-like Web Push device: its subscription, as `PushSubscription.toJSON()`
    /// gives it (`p256dh` and `auth` base64url).
    public func registerWebPushSubscription(
        endpoint: String, p256dh: String, auth: String
    ) async throws -> DeviceRegistration {
        let registration = WebPushRegistration(
            subscription: .init(endpoint: endpoint, keys: ["p256dh": p256dh, "auth": auth]))
        return try await registerDevice(body: try JSONEncoder().encode(registration), token: endpoint)
    }

    /// The body of a Web Push device registration: the browser's `PushSubscription.toJSON()` under `subscription`.
    private struct WebPushRegistration: Encodable {
        struct Subscription: Encodable {
            var endpoint: String
            var keys: [String: String]

            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(endpoint, forKey: .endpoint)
                try container.encodeNil(forKey: .expirationTime)
                try container.encode(keys, forKey: .keys)
            }

            enum CodingKeys: String, CodingKey { case endpoint, expirationTime, keys }
        }

        var service = "webpush"
        var subscription: Subscription
    }

    /// `GET /v1/webpush/vapid-public-key`: the key a Web Push subscription must be made for.
    public func vapidPublicKey() async throws -> String {
        let response = try await send("GET", "/v1/webpush/vapid-public-key", bearer: "", endpoint: "webpush")
        return try decode(VAPIDPublicKey.self, response, endpoint: "webpush").publicKey
    }

    private struct VAPIDPublicKey: Decodable {
        var publicKey: String
    }

    /// `POST /v1/devices` with `fields` (the service and its address).
    public func registerDevice(_ fields: [String: String]) async throws -> DeviceRegistration {
        try await registerDevice(body: try JSONEncoder().encode(fields), token: fields["token"] ?? "")
    }

    private func registerDevice(body: Data, token: String) async throws -> DeviceRegistration {
        let response = try await send("POST", "/v1/devices", body: body, endpoint: "devices")
        if let registration = try? JSONDecoder().decode(DeviceRegistration.self, from: response.body) {
            return registration
        }
        return DeviceRegistration(token: token, alias: nil)
    }

    /// `DELETE /v1/devices/{id}`: stops signals to a device (an APNs device may be named by its token).
    public func unregisterDevice(token: String) async throws {
        _ = try await send("DELETE", "/v1/devices/\(Self.pathSegment(token))", endpoint: "devices")
    }

    /// `POST /v1/deliveries` with a delivery token: stores a message for its recipient.
    public func deliver(_ message: OutgoingMessage, deliveryToken: String) async throws -> DeliveryReceipt {
        let response = try await send(
            "POST", "/v1/deliveries", body: try JSONEncoder().encode(message), bearer: deliveryToken,
            endpoint: "deliveries")
        return try decode(DeliveryReceipt.self, response, endpoint: "deliveries")
    }
}
