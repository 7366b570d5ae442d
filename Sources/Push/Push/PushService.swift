/// The push services a device can be reached through.
public enum PushServiceName: String, Sendable, Hashable, CaseIterable, Codable {
    /// Apple Push Notification service.
    case apns
    /// Firebase Cloud Messaging (HTTP v1).
    case fcm
    /// Web Push (RFC 8030) to a browser's push service.
    case webpush
}

/// Where a device is reached, in its push service's terms, as the store keeps it: the service's address for the
/// device (APNs device token, FCM registration token, Web Push endpoint) in `token`, the app it belongs to, the
/// service's environment (`production`, or `sandbox` for APNs development builds), and the keys a message to it is
/// encrypted with where the service has them (Web Push).
public struct PushAddress: Sendable, Hashable {
    /// The service.
    public var service: PushServiceName
    /// The service's address for the device, exactly as the service needs it (case kept).
    public var token: String
    /// The app: an APNs bundle id, an Android package name; empty where the service has none.
    public var app: String
    /// `production` or `sandbox`.
    public var environment: PushEnvironment
    /// The device's message-encryption keys in the service's own form (Web Push: `p256dh.auth`, each base64url);
    /// empty where the service has none.
    public var keys: String

    /// Creates an address.
    public init(
        service: PushServiceName, token: String, app: String, environment: PushEnvironment = .production,
        keys: String = ""
    ) {
        self.service = service
        self.token = token
        self.app = app
        self.environment = environment
        self.keys = keys
    }

    /// An APNs device: its device token, its app's topic (bundle id) and environment.
    public static func apns(_ token: String, topic: String, environment: PushEnvironment) -> PushAddress {
        PushAddress(service: .apns, token: token, app: topic, environment: environment)
    }
}

/// A push service's environment. Only APNs has two; FCM and Web Push devices are `production`.
public enum PushEnvironment: String, Sendable, Codable, CaseIterable {
    /// Development builds (APNs api.sandbox.push.apple.com).
    case sandbox
    /// Everything else.
    case production
}

/// A device registration as the API received it: the service's own fields, still to be checked by that service.
public struct DeviceRegistration: Sendable {
    /// The service named (or `apns` when the request named none).
    public var service: PushServiceName
    /// The request's string fields other than `service` (`token`, `topic`, `environment`, `app`, …).
    public var fields: [String: String]

    /// Creates a registration.
    public init(service: PushServiceName, fields: [String: String]) {
        self.service = service
        self.fields = fields
    }
}

/// Why a push service refused a device registration: a code for `{"error"}` and a message for people, neither
/// holding the submitted token.
public struct RegistrationError: Error, Sendable, Equatable {
    /// The machine-readable code (`invalidArgument`, `unknownTopic`, `unknownApp`, `unknownService`).
    public var code: String
    /// What is wrong.
    public var message: String

    /// Creates an error.
    public init(_ code: String, _ message: String) {
        self.code = code
        self.message = message
    }
}

/// One push service as the dispatcher sees it: it checks the addresses of its devices, turns a service-neutral
/// signal into its wire form, sends it and reports one ``PushOutcome``. Everything service-neutral (the outbox,
/// pacing, the background budget, the retry schedule, the content-free form) stays above it.
public protocol PushService: Sendable {
    /// Which service this is.
    var name: PushServiceName { get }
    /// The request fields a registration for this service may hold (besides `service`); a field inside an object
    /// is named by its path (`subscription.keys.auth`).
    var registrationFields: Set<String> { get }
    /// The fields a registration must hold (by default, all of ``registrationFields``).
    var requiredRegistrationFields: Set<String> { get }
    /// Checks a registration and returns the device's address; throws for a malformed address or an app this
    /// server does not send for.
    func address(for registration: DeviceRegistration) throws(RegistrationError) -> PushAddress
    /// The registration fields that name `address`, as the API answers them: the reverse of
    /// ``address(for:)``.
    func registrationFields(of address: PushAddress) -> [String: String]
    /// The kind of signal the device's app gets, or `nil` when no configured app serves it.
    func signalKind(for address: PushAddress) -> PushSignal.Kind?
    /// Whether the service throttles background signals per device (Apple: "a few per hour"), so the dispatcher
    /// keeps them within its background budget.
    var throttlesBackgroundSignals: Bool { get }
    /// Sends `signal` to `address` once and reports the outcome. Never throws: every failure is an outcome.
    func send(_ signal: PushSignal, to address: PushAddress) async -> PushOutcome
    /// Keeps what every process sending for this store must agree on (provider and access tokens) in `store`.
    /// Called once, before the first send.
    func share(in store: any SharedTokenStore)
    /// Closes the service's connections.
    func shutdown()
}

extension PushService {
    /// Every field is required.
    public var requiredRegistrationFields: Set<String> { registrationFields }
    /// No throttling of background signals.
    public var throttlesBackgroundSignals: Bool { false }
    /// Nothing to share.
    public func share(in store: any SharedTokenStore) {}
    /// Nothing to close.
    public func shutdown() {}
}
