import Durations
import Foundation
import HTTP2Client
import Locking
import Push

/// Sends content-free signals to Android devices through Firebase Cloud Messaging (HTTP v1), or a local fcm-sim.
///
/// Each app has a service account; its OAuth access token (``FCMAccessTokens``) is shared by every process
/// through the store and replaced once when FCM answers 401. Every send is a stream on one multiplexed HTTP/2
/// connection to the endpoint. Answers are classified from `error.details[].errorCode`:
///
/// | answer | outcome |
/// |---|---|
/// | 200 | delivered |
/// | `UNREGISTERED` (404); 400 `INVALID_ARGUMENT` about the registration token | registration removed |
/// | 403 `SENDER_ID_MISMATCH` | registration removed (the token belongs to another project) |
/// | 429 `QUOTA_EXCEEDED` | retried after `Retry-After`, or after 60 s without one |
/// | 500 `INTERNAL`, 503 `UNAVAILABLE`, a lost connection | retried with backoff, honouring `Retry-After` |
/// | 401 (not `THIRD_PARTY_AUTH_ERROR`) | a new access token, sent again once |
/// | `THIRD_PARTY_AUTH_ERROR`, any other 4xx (a 404 without `UNREGISTERED`: a wrong endpoint, not a gone device), a body the guard refuses | defect |
public final class FCMPushService: PushService {
    private struct Route: Sendable {
        var app: FCMConfiguration.App
        var tokens: FCMAccessTokens
    }

    /// The configuration the service was created with.
    public let configuration: FCMConfiguration
    private let routes: [String: Route]
    private let client: HTTP2Client

    /// Checks the configuration's apps; connections open on first use. `clock` dates the OAuth assertions and tells
    /// when an access token is due.
    public init(configuration: FCMConfiguration, clock: any WallClock = SystemClock()) {
        self.configuration = configuration
        var byEmail: [String: FCMAccessTokens] = [:]
        var routes: [String: Route] = [:]
        for app in configuration.apps {
            let email = app.serviceAccount.clientEmail
            let tokens =
                byEmail[email]
                ?? FCMAccessTokens(
                    account: app.serviceAccount, tokenURI: configuration.tokenURI, caFile: configuration.caFile,
                    proxy: configuration.proxy, clock: clock)
            byEmail[email] = tokens
            routes[app.app] = Route(app: app, tokens: tokens)
        }
        self.routes = routes
        client = HTTP2Client(
            configuration: .init(
                baseURL: configuration.endpoint, tls: .init(caFile: configuration.caFile), requestTimeout: .seconds(15),
                proxy: configuration.proxy))
    }

    deinit { client.shutdown() }

    /// `fcm`.
    public var name: PushServiceName { .fcm }

    /// `token` (the FCM registration token, case kept) and `app` (the Android package name).
    public var registrationFields: Set<String> { ["token", "app"] }

    /// Whether `name` is an Android package name: dot-separated segments of letters, digits and `_`, each
    /// starting with a letter, at least two segments.
    public static func isValidPackageName(_ name: String) -> Bool {
        let segments = name.split(separator: ".", omittingEmptySubsequences: false)
        return name.utf8.count <= 255 && segments.count >= 2
            && segments.allSatisfy { segment in
                guard let first = segment.utf8.first, (0x41...0x5a).contains(first) || (0x61...0x7a).contains(first)
                else { return false }
                return segment.utf8.allSatisfy {
                    (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0) || $0 == 0x5f
                }
            }
    }

    /// Whether `token` looks like an FCM registration token: 32 to 2048 characters of letters, digits, `-`, `_`
    /// and `:` (Google does not document the format; these are the characters it uses).
    public static func isValidRegistrationToken(_ token: String) -> Bool {
        (32...2048).contains(token.utf8.count)
            && token.utf8.allSatisfy {
                (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0) || $0 == 0x2d
                    || $0 == 0x5f || $0 == 0x3a
            }
    }

    /// Checks an FCM registration: a registration token (kept as given) and an app this server has.
    public func address(for registration: DeviceRegistration) throws(RegistrationError) -> PushAddress {
        guard let token = registration.fields["token"], Self.isValidRegistrationToken(token) else {
            throw RegistrationError(
                "invalidArgument", "'token' must be an FCM registration token (32 or more of [A-Za-z0-9_:-]).")
        }
        guard let app = registration.fields["app"], routes[app] != nil else {
            throw RegistrationError("unknownApp", "No FCM app of this server has that package name.")
        }
        return PushAddress(service: .fcm, token: token, app: app, environment: .production)
    }

    /// `token` and `app`.
    public func registrationFields(of address: PushAddress) -> [String: String] {
        ["token": address.token, "app": address.app]
    }

    /// The kind of signal the device's app gets.
    public func signalKind(for address: PushAddress) -> PushSignal.Kind? { routes[address.app]?.app.signalKind }

    /// Shares every service account's access token through `store`.
    public func share(in store: any SharedTokenStore) {
        for route in routes.values {
            let tokens = route.tokens
            Task { await tokens.share(in: store) }
        }
    }

    /// Sends `signal` as a data-only message and classifies the answer.
    public func send(_ signal: PushSignal, to address: PushAddress) async -> PushOutcome {
        guard let route = routes[address.app] else { return .defect(reason: "unknownApp") }
        let body = FCMMessage(token: address.token, signal: signal).body
        do {
            try FCMPayloadGuard.check(body)
        } catch {
            return .defect(reason: "payloadGuard")
        }
        var refused: String?
        for _ in 0..<2 {
            let accessToken: String
            do {
                accessToken = try await route.tokens.token(replacing: refused)
            } catch FCMAccessTokens.Failure.refused(let code) {
                return .retry(reason: "oauth:" + code, retryAfter: 60)
            } catch {
                return .retry(reason: "oauthUnavailable", retryAfter: nil)
            }
            let response: HTTP2Client.Response
            do {
                response = try await client.execute(
                    .init(
                        method: "POST",
                        path: "/v1/projects/\(route.app.serviceAccount.projectID)/messages:send",
                        headers: [
                            .init("authorization", "Bearer " + accessToken),
                            .init("content-type", "application/json; charset=UTF-8"),
                        ], body: body))
            } catch {
                return .retry(reason: "transport", retryAfter: nil)
            }
            let answer = FCMAnswer(response)
            if answer.isExpiredCredential, refused == nil {
                refused = accessToken
                continue
            }
            return answer.outcome
        }
        return .retry(reason: "UNAUTHENTICATED", retryAfter: nil)
    }

    /// Closes the connections.
    public func shutdown() {
        client.shutdown()
        for route in routes.values { route.tokens.shutdown() }
    }

    /// The connections opened so far to the FCM endpoint.
    public var connectionsOpened: Int { client.connectionsOpened }
}

/// One FCM answer, read: its status, `error.status`, the `errorCode` of its `FcmError` detail, the message and
/// `Retry-After`.
struct FCMAnswer: Sendable, Equatable {
    var status: Int
    var errorStatus: String?
    var errorCode: String?
    var message: String
    var retryAfter: Double?

    init(status: Int, errorStatus: String? = nil, errorCode: String? = nil, message: String = "", retryAfter: Double?) {
        self.status = status
        self.errorStatus = errorStatus
        self.errorCode = errorCode
        self.message = message
        self.retryAfter = retryAfter
    }

    init(_ response: HTTP2Client.Response) {
        status = response.status
        retryAfter = response[header: "retry-after"].flatMap { Double($0.trimmingCharacters(in: .whitespaces)) }
        let object = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
        let error = object?["error"] as? [String: Any]
        errorStatus = error?["status"] as? String
        message = (error?["message"] as? String) ?? ""
        let details = error?["details"] as? [[String: Any]] ?? []
        errorCode =
            details.first { ($0["@type"] as? String)?.hasSuffix("google.firebase.fcm.v1.FcmError") == true }?[
                "errorCode"] as? String
    }

    /// 401 for the access token (not the app's APNs or Web Push credentials, `THIRD_PARTY_AUTH_ERROR`).
    var isExpiredCredential: Bool { status == 401 && errorCode != "THIRD_PARTY_AUTH_ERROR" }

    /// The reason recorded for a failure: the errorCode, else the status name, else the HTTP status.
    var reason: String { String((errorCode ?? errorStatus ?? "HTTP \(status)").prefix(64)) }

    /// What the dispatcher does next.
    var outcome: PushOutcome {
        if status == 200 { return .delivered }
        switch (status, errorCode) {
        case (_, "UNREGISTERED"):
            return .dropRegistration(reason: reason, unregisteredAt: nil)
        case (_, "SENDER_ID_MISMATCH"):
            return .dropRegistration(reason: reason, unregisteredAt: nil)
        case (400, _) where message.localizedCaseInsensitiveContains("registration token"):
            return .dropRegistration(reason: "invalidRegistrationToken", unregisteredAt: nil)
        case (_, "QUOTA_EXCEEDED"), (429, _):
            return .retry(reason: reason, retryAfter: retryAfter ?? 60)
        case (_, "UNAVAILABLE"), (_, "INTERNAL"), (500...599, _):
            return .retry(reason: reason, retryAfter: retryAfter)
        case (401, _) where errorCode != "THIRD_PARTY_AUTH_ERROR":
            return .retry(reason: reason, retryAfter: nil)
        default:
            return .defect(reason: reason)
        }
    }
}
