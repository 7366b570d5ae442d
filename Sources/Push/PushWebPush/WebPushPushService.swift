import Durations
import Foundation
import HTTP2Client
import HTTPClient
import Locking
import OpenSSLCrypto
import Push

/// Sends content-free signals to browsers through their push services (RFC 8030), each encrypted to the
/// subscription (RFC 8291) and signed with the server's VAPID key (RFC 8292).
///
/// A device is a browser's `PushSubscription`: its endpoint (a URL at the browser vendor's push service) is the
/// address, its `p256dh` and `auth` keys are kept with it. Endpoints are chosen by clients, so
/// ``WebPushEndpointPolicy`` checks them at registration and again on every resolved address before connecting.
/// Every push-service origin gets one HTTP/2 connection, reused, with connect and response timeouts and a capped
/// response body. Answers:
///
/// | answer | outcome |
/// |---|---|
/// | 201 (or any 2xx) | delivered |
/// | 404, 410 | subscription removed (expired or unsubscribed) |
/// | 401, 403 | subscription removed: it was made for another application-server key (logged) |
/// | 429 | retried after `Retry-After`, or after 60 s without one |
/// | 5xx, a lost connection | retried with backoff, honouring `Retry-After` |
/// | 413, any other 4xx, a body the guard refuses, an endpoint the policy refuses at send time | defect |
public final class WebPushPushService: PushService {
    /// The configuration the service was created with.
    public let configuration: WebPushConfiguration
    /// The key new subscriptions are made for.
    let vapid: VAPIDTokens
    /// Every key this process has signed with, by ``VAPIDTokens/keyID``: a push service binds a subscription to the
    /// key it was made for, so one made before a reload replaced the key is still signed with its own.
    let keyring: [String: VAPIDTokens]
    /// The key the process started with: the one subscriptions stored without a key id were made for.
    let initialKeyID: String
    private let clients = LockedValue<[String: HTTP2Client]>([:])
    /// The origins that turned down HTTP/2, with their HTTP/1.1 clients (`WebPushPushService+HTTP1.swift`).
    let http1Origins = LockedValue<[String: HTTP1Origin]>([:])
    private let log: @Sendable (String) -> Void

    /// The most push-service origins with an open client at once; past it one of the others is closed (browsers
    /// use a handful of push services, so this bounds what a flood of odd endpoints can hold open).
    static let maximumOrigins = 256

    /// Reads the VAPID key's public half; connections open on first use. `clock` dates the VAPID tokens; `log`
    /// receives one line per subscription removed for a key mismatch (never the endpoint).
    /// `previous`, the service this one replaces (a reload), passes on the keys it signed with;
    /// `configuration.previousVapidKeys` are earlier keys from files, for a process started after a rotation.
    public init(
        configuration: WebPushConfiguration, clock: any WallClock = SystemClock(),
        log: @escaping @Sendable (String) -> Void = { _ in }, previous: WebPushPushService? = nil
    ) throws {
        self.configuration = configuration
        let current = try VAPIDTokens(key: configuration.vapidKey, subject: configuration.subject, clock: clock)
        vapid = current
        var keyring = previous?.keyring ?? [:]
        for key in configuration.previousVapidKeys {
            let tokens = try VAPIDTokens(key: key, subject: configuration.subject, clock: clock)
            keyring[tokens.keyID] = keyring[tokens.keyID] ?? tokens
        }
        keyring[current.keyID] = current
        self.keyring = keyring
        initialKeyID = previous?.initialKeyID ?? current.keyID
        self.log = log
    }

    /// The keys that sign for subscriptions of `keyID`: its own when this process has it, the key the process
    /// started with for a subscription stored without one, else the current key (a push service that refuses it
    /// answers 401/403 and the subscription is removed).
    func signer(for keyID: String) -> VAPIDTokens {
        keyring[keyID.isEmpty ? initialKeyID : keyID] ?? vapid
    }

    deinit { shutdown() }

    /// `webpush`.
    public var name: PushServiceName { .webpush }

    /// The VAPID public key, base64url of the 65-byte point: what `GET /v1/webpush/vapid-public-key` answers and
    /// browsers pass to `pushManager.subscribe` as `applicationServerKey`.
    public var vapidPublicKey: String { vapid.publicKey }

    /// The browser's `PushSubscription.toJSON()`: `subscription.endpoint`, `subscription.keys.p256dh`,
    /// `subscription.keys.auth` and `subscription.expirationTime` (`null` or a time; not required).
    public var registrationFields: Set<String> {
        ["subscription.endpoint", "subscription.keys.p256dh", "subscription.keys.auth", "subscription.expirationTime"]
    }

    /// All but `expirationTime`.
    public var requiredRegistrationFields: Set<String> {
        ["subscription.endpoint", "subscription.keys.p256dh", "subscription.keys.auth"]
    }

    /// Checks a subscription: an endpoint the policy accepts, a P-256 `p256dh`, a 16-byte `auth`.
    public func address(for registration: DeviceRegistration) throws(RegistrationError) -> PushAddress {
        let endpoint = registration.fields["subscription.endpoint"] ?? ""
        _ = try configuration.endpointPolicy.check(endpoint)
        let keys = try WebPushSubscriptionKeys(
            p256dh: registration.fields["subscription.keys.p256dh"] ?? "",
            auth: registration.fields["subscription.keys.auth"] ?? "")
        if let expiration = registration.fields["subscription.expirationTime"], Double(expiration) == nil {
            throw RegistrationError("invalidArgument", "'subscription.expirationTime' must be null or a time.")
        }
        return PushAddress(
            service: .webpush, token: endpoint, app: vapid.keyID, environment: .production, keys: keys.stored)
    }

    /// `endpoint`.
    public func registrationFields(of address: PushAddress) -> [String: String] {
        ["endpoint": address.token]
    }

    /// The configured kind, for every subscription.
    public func signalKind(for address: PushAddress) -> PushSignal.Kind? { configuration.signalKind }

    /// Encrypts `signal` to the subscription, signs for its origin, sends it and classifies the answer.
    public func send(_ signal: PushSignal, to address: PushAddress) async -> PushOutcome {
        await send(
            toEndpoint: address.token, keys: address.keys, topic: WebPushMessage.topic(for: signal.alias),
            urgency: WebPushMessage.urgency(for: configuration.signalKind), signer: signer(for: address.app)
        ) { keys in
            // A signal is never sent unencrypted: a browser subscription always has keys.
            guard let keys else { throw MissingKeys() }
            return try WebPushMessage(signal: signal).body(for: keys)
        }
    }

    /// A body that must be encrypted has no keys to encrypt to.
    struct MissingKeys: Error {}

    /// Checks `url` with the endpoint policy again (it was chosen by a client), makes the body with the stored
    /// `keys` (`nil` when there are none), signs for the endpoint's origin and posts it; every failure is an
    /// outcome. Without keys the body goes as `application/json`.
    func send(
        toEndpoint url: String, keys stored: String, topic: String, urgency: String = "normal",
        signer: VAPIDTokens? = nil, body makeBody: (WebPushSubscriptionKeys?) throws -> [UInt8]
    ) async -> PushOutcome {
        let endpoint: WebPushEndpointPolicy.Endpoint
        do {
            endpoint = try configuration.endpointPolicy.check(url)
        } catch {
            return .defect(reason: "endpointRefused")
        }
        var keys: WebPushSubscriptionKeys?
        if !stored.isEmpty {
            guard let parsed = WebPushSubscriptionKeys(stored: stored) else { return .defect(reason: "keys") }
            keys = parsed
        }
        let body: [UInt8]
        let authorization: String
        do {
            body = try makeBody(keys)
            authorization = try (signer ?? vapid).authorization(for: endpoint.origin)
        } catch is WebPushPayloadGuard.Violation {
            return .defect(reason: "payloadGuard")
        } catch is MissingKeys {
            return .defect(reason: "keys")
        } catch {
            return .defect(reason: "encryption")
        }
        return await post(
            body, to: endpoint, topic: topic, urgency: urgency, authorization: authorization,
            contentType: keys == nil ? "application/json; charset=utf-8" : nil)
    }

    /// POSTs one body to `endpoint` with the RFC 8030 headers (`TTL` ``WebPushMessage/timeToLive``, `urgency`,
    /// `topic`) and classifies the answer. An `aes128gcm` body when `contentType` is `nil`; otherwise an
    /// unencrypted one of that type.
    func post(
        _ body: [UInt8], to endpoint: WebPushEndpointPolicy.Endpoint, topic: String, urgency: String,
        authorization: String, contentType: String?
    ) async -> PushOutcome {
        var headers: [HTTPField] = [
            .init("ttl", String(WebPushMessage.timeToLive)), .init("urgency", urgency), .init("topic", topic),
        ]
        if let contentType {
            headers.append(.init("content-type", contentType))
        } else {
            headers += [.init("content-encoding", "aes128gcm"), .init("content-type", "application/octet-stream")]
        }
        headers.append(.init("authorization", authorization))
        if http1Origins.withLock({ $0[endpoint.origin] != nil }) {
            return await postHTTP1(body, to: endpoint, headers: headers)
        }
        let response: HTTP2Client.Response
        do {
            response = try await client(for: endpoint).execute(
                .init(method: "POST", path: endpoint.path, headers: headers, body: body))
        } catch .connectionFailed(let why) where why.hasPrefix("no address") {
            return .defect(reason: "endpointRefused")
        } catch .http2NotOffered {
            // An HTTP/1.1-only push service (a self-hosted UnifiedPush distributor): HTTP/1.1 from now on.
            return await postHTTP1(body, to: endpoint, headers: headers)
        } catch {
            return .retry(reason: "transport", retryAfter: nil)
        }
        let outcome = WebPushAnswer(response).outcome
        if case .dropRegistration(let reason, _) = outcome, reason == "keyMismatch" {
            log("mailboxd: a Web Push subscription was made for another VAPID key; removed it")
        }
        return outcome
    }

    /// The client for `endpoint`'s origin, created on first use.
    private func client(for endpoint: WebPushEndpointPolicy.Endpoint) -> HTTP2Client {
        let exempt = configuration.endpointPolicy.isAllowed(endpoint)
        let tls = HTTP2Client.TLS(caFile: configuration.caFile)
        let permits: (@Sendable (String) -> Bool)? =
            exempt ? nil : { @Sendable in WebPushEndpointPolicy.permitsAddress($0) }
        let picked: (client: HTTP2Client, retired: HTTP2Client?) = clients.withLock { clients in
            if let existing = clients[endpoint.origin] { return (existing, nil) }
            var retired: HTTP2Client?
            if clients.count >= Self.maximumOrigins, let victim = clients.keys.first {
                retired = clients.removeValue(forKey: victim)
            }
            let created = HTTP2Client(
                configuration: .init(
                    baseURL: endpoint.origin, tls: tls, connectTimeout: .seconds(5), requestTimeout: .seconds(15),
                    maximumResponseBodySize: 16 << 10, permitsAddress: permits, proxy: configuration.proxy))
            clients[endpoint.origin] = created
            return (created, retired)
        }
        picked.retired?.shutdown()
        return picked.client
    }

    /// Closes every connection.
    public func shutdown() {
        let all = clients.withLock { clients -> [HTTP2Client] in
            defer { clients.removeAll() }
            return Array(clients.values)
        }
        for client in all { client.shutdown() }
        let http1 = http1Origins.withLock { origins -> [HTTPClient] in
            defer { origins.removeAll() }
            return origins.values.map(\.client)
        }
        for client in http1 { client.shutdown() }
    }

    /// The connections opened so far, over every origin.
    public var connectionsOpened: Int { clients.withLock { $0.values.reduce(0) { $0 + $1.connectionsOpened } } }
}

/// One push service's answer, read: its status and `Retry-After`.
struct WebPushAnswer: Sendable, Equatable {
    var status: Int
    var retryAfter: Double?

    init(status: Int, retryAfter: Double? = nil) {
        self.status = status
        self.retryAfter = retryAfter
    }

    /// An answer with the text of its `Retry-After` header, if any (seconds).
    init(status: Int, retryAfterHeader: String?) {
        self.init(
            status: status, retryAfter: retryAfterHeader.flatMap { Double($0.trimmingCharacters(in: .whitespaces)) })
    }

    init(_ response: HTTP2Client.Response) {
        self.init(status: response.status, retryAfterHeader: response[header: "retry-after"])
    }

    /// What the dispatcher does next.
    var outcome: PushOutcome {
        switch status {
        case 200...299: .delivered
        case 404, 410: .dropRegistration(reason: "HTTP \(status)", unregisteredAt: nil)
        case 401, 403: .dropRegistration(reason: "keyMismatch", unregisteredAt: nil)
        case 429: .retry(reason: "HTTP 429", retryAfter: retryAfter ?? 60)
        case 500...599: .retry(reason: "HTTP \(status)", retryAfter: retryAfter)
        default: .defect(reason: "HTTP \(status)")
        }
    }
}
