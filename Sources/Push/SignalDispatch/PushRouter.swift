import Locking
import Push

/// The push services this mailboxd sends through, by name: the one place a device's service picks the code that
/// checks its address and sends its signals. Copies share one table, which ``replace(with:)`` swaps while the
/// service runs (a reload): the dispatcher, the API and JMAP's pusher see the new services from their next use.
public struct PushRouter: Sendable {
    private let table: LockedValue<[PushServiceName: any PushService]>

    /// Routes to `services` (one per name; a later one with the same name replaces an earlier one).
    public init(_ services: [any PushService]) {
        table = LockedValue(Self.byName(services))
    }

    private static func byName(_ services: [any PushService]) -> [PushServiceName: any PushService] {
        var byName: [PushServiceName: any PushService] = [:]
        for service in services { byName[service.name] = service }
        return byName
    }

    /// The service named `name`, when this server sends through it.
    public func service(_ name: PushServiceName) -> (any PushService)? { table.withLock { $0[name] } }

    /// The service that also carries standard push subscriptions' messages (JMAP's, over Web Push), when one is
    /// configured.
    public var subscriptionService: (any SubscriptionPushService)? {
        let services = table.withLock { $0 }
        return services.keys.sorted { $0.rawValue < $1.rawValue }.lazy
            .compactMap { services[$0] as? any SubscriptionPushService }.first
    }

    /// The services configured, by name.
    public var names: [PushServiceName] { table.withLock { $0.keys.sorted { $0.rawValue < $1.rawValue } } }

    /// Checks a registration with its service; throws `unknownService` for a service this server does not send
    /// through.
    public func address(for registration: DeviceRegistration) throws(RegistrationError) -> PushAddress {
        guard let service = service(registration.service) else {
            throw RegistrationError(
                "unknownService", "This server does not send through \(registration.service.rawValue).")
        }
        return try service.address(for: registration)
    }

    /// Lets every service keep what instances must agree on in `store`.
    public func share(in store: any SharedTokenStore) {
        for service in table.withLock({ Array($0.values) }) { service.share(in: store) }
    }

    /// Routes to `services` from now on and returns the ones replaced: a send already under way finishes on the
    /// service it began with, so the caller shuts them down once those had time to finish.
    public func replace(with services: [any PushService]) -> [any PushService] {
        table.withLock { table in
            defer { table = Self.byName(services) }
            return Array(table.values)
        }
    }

    /// Closes every service's connections.
    public func shutdown() {
        for service in table.withLock({ Array($0.values) }) { service.shutdown() }
    }
}
