import Durations
import Locking
import Push

/// A push service for tests: it records every signal it is asked to send and answers with the outcomes it was
/// given (in order; `.delivered` once they run out). It takes registrations the way the real APNs service does
/// for its one topic, so the API's device routes run unchanged.
public final class RecordingPushService: PushService {
    /// One send: where to, the signal, and when.
    public struct Sent: Sendable, Equatable {
        /// The device's address.
        public var address: PushAddress
        /// The signal.
        public var signal: PushSignal
        /// The time of the send on the recorder's clock (`nil` without one).
        public var at: Double?
    }

    /// The service it stands in for.
    public let name: PushServiceName
    /// The app it takes registrations for.
    public let app: String
    /// The kind of signal its app gets.
    public let kind: PushSignal.Kind
    /// Whether it throttles background signals (as APNs does).
    public let throttlesBackgroundSignals: Bool
    private let clock: (any WallClock)?
    private let state = LockedValue<(sent: [Sent], outcomes: [PushOutcome])>(([], []))

    /// A recorder for `app`; with `clock` (a test clock the store also reads), each send records its time on it.
    public init(
        name: PushServiceName = .apns, app: String = "com.example.mail", kind: PushSignal.Kind = .badge,
        throttlesBackgroundSignals: Bool = false, clock: (any WallClock)? = nil
    ) {
        self.name = name
        self.app = app
        self.kind = kind
        self.throttlesBackgroundSignals = throttlesBackgroundSignals
        self.clock = clock
    }

    /// The signals sent so far, oldest first.
    public var sent: [Sent] { state.withLock { $0.sent } }

    /// Answers the next sends with `outcomes`, in order.
    public func script(_ outcomes: [PushOutcome]) { state.withLock { $0.outcomes += outcomes } }

    /// `token`, and for APNs `topic` and `environment`; for others `app`.
    public var registrationFields: Set<String> {
        name == .apns ? ["token", "topic", "environment"] : ["token", "app"]
    }

    /// Takes any non-empty token for its app.
    public func address(for registration: DeviceRegistration) throws(RegistrationError) -> PushAddress {
        let fields = registration.fields
        guard let token = fields["token"], !token.isEmpty else { throw RegistrationError("invalidArgument", "token") }
        let app = fields[name == .apns ? "topic" : "app"] ?? ""
        guard app == self.app else { throw RegistrationError(name == .apns ? "unknownTopic" : "unknownApp", "app") }
        let environment = fields["environment"].flatMap(PushEnvironment.init(rawValue:)) ?? .production
        return PushAddress(service: name, token: token, app: app, environment: environment)
    }

    /// The fields ``address(for:)`` reads, from `address`.
    public func registrationFields(of address: PushAddress) -> [String: String] {
        var fields = ["token": address.token, name == .apns ? "topic" : "app": address.app]
        if name == .apns { fields["environment"] = address.environment.rawValue }
        return fields
    }

    /// Its app's kind.
    public func signalKind(for address: PushAddress) -> PushSignal.Kind? { address.app == app ? kind : nil }

    /// Records the signal and answers the next scripted outcome.
    public func send(_ signal: PushSignal, to address: PushAddress) async -> PushOutcome {
        let at = clock?.secondsSince1970
        return state.withLock { state in
            state.sent.append(Sent(address: address, signal: signal, at: at))
            return state.outcomes.isEmpty ? .delivered : state.outcomes.removeFirst()
        }
    }
}
