import Push

/// The push services this mailboxd sends through, by name: the one place a device's service picks the code that
/// checks its address and sends its signals.
public struct PushRouter: Sendable {
    private let services: [PushServiceName: any PushService]

    /// Routes to `services` (one per name; a later one with the same name replaces an earlier one).
    public init(_ services: [any PushService]) {
        var byName: [PushServiceName: any PushService] = [:]
        for service in services { byName[service.name] = service }
        self.services = byName
    }

    /// The service named `name`, when this server sends through it.
    public func service(_ name: PushServiceName) -> (any PushService)? { services[name] }

    /// The service that also carries standard push subscriptions' messages (JMAP's, over Web Push), when one is
    /// configured.
    public var subscriptionService: (any SubscriptionPushService)? {
        names.lazy.compactMap { services[$0] as? any SubscriptionPushService }.first
    }

    /// The services configured, by name.
    public var names: [PushServiceName] { services.keys.sorted { $0.rawValue < $1.rawValue } }

    /// Checks a registration with its service; throws `unknownService` for a service this server does not send
    /// through.
    public func address(for registration: DeviceRegistration) throws(RegistrationError) -> PushAddress {
        guard let service = services[registration.service] else {
            throw RegistrationError(
                "unknownService", "This server does not send through \(registration.service.rawValue).")
        }
        return try service.address(for: registration)
    }

    /// Lets every service keep what instances must agree on in `store`.
    public func share(in store: any SharedTokenStore) {
        for service in services.values { service.share(in: store) }
    }

    /// Closes every service's connections.
    public func shutdown() {
        for service in services.values { service.shutdown() }
    }
}
