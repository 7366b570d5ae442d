import Foundation

/// One signal addressed to one device, with the APNs headers that go with it.
public struct APNsNotification: Sendable, Hashable {
    /// The device the signal goes to.
    public var deviceToken: DeviceToken
    /// The content-free signal.
    public var signal: ContentFreeSignal
    /// The app's bundle id (`apns-topic`).
    public var topic: APNsTopic
    /// How long APNs may store the notification (`apns-expiration`).
    public var expiration: APNsExpiration
    /// The collapse id (`apns-collapse-id`), or `nil`.
    public var collapseID: CollapseID?
    /// The request id (`apns-id`); APNs echoes it back.
    public var apnsID: UUID
    /// The priority (`apns-priority`).
    public let priority: APNsPriority

    /// Creates a notification; `apnsID` defaults to a new random UUID. `priority` defaults to the signal's (5 for background, 10 for a badge); a
    /// background signal with priority 10 throws ``APNsValidationError/backgroundRequiresPriority5``.
    public init(
        deviceToken: DeviceToken, signal: ContentFreeSignal, topic: APNsTopic,
        expiration: APNsExpiration = .default, collapseID: CollapseID? = nil, apnsID: UUID? = nil,
        priority: APNsPriority? = nil
    ) throws(APNsValidationError) {
        if signal.pushType == .background, priority == .immediate { throw .backgroundRequiresPriority5 }
        if case .at(let seconds) = expiration, seconds < 0 { throw .invalidExpiration }
        self.deviceToken = deviceToken
        self.signal = signal
        self.topic = topic
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID ?? UUID.random()
        self.priority = priority ?? signal.defaultPriority
    }

    /// The request path, `/3/device/<token>`.
    public var path: String { "/3/device/" + deviceToken.hex }

    /// The `apns-*` headers in the order they are sent, for a request built at `now`:
    /// `apns-push-type`, `apns-priority`, `apns-topic`, `apns-expiration`, `apns-id`, then `apns-collapse-id`
    /// when set. Authorization is added by the client.
    public func headers(now: Date) -> [(name: String, value: String)] {
        var fields: [(name: String, value: String)] = [
            ("apns-push-type", signal.pushType.rawValue),
            ("apns-priority", String(priority.rawValue)),
            ("apns-topic", topic.rawValue),
            ("apns-expiration", expiration.headerValue(now: now)),
            ("apns-id", apnsID.uuidString.lowercased()),
        ]
        if let collapseID { fields.append(("apns-collapse-id", collapseID.rawValue)) }
        return fields
    }

}

extension UUID {
    /// A random (version 4) UUID from the system generator (`getrandom`), without the file opened per call by
    /// `UUID()` on Linux.
    static func random() -> UUID {
        var generator = SystemRandomNumberGenerator()
        let high = generator.next() as UInt64
        let low = generator.next() as UInt64
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in 0..<8 {
            bytes[index] = UInt8(truncatingIfNeeded: high >> (8 * index))
            bytes[8 + index] = UInt8(truncatingIfNeeded: low >> (8 * index))
        }
        bytes[6] = bytes[6] & 0x0F | 0x40  // version 4
        bytes[8] = bytes[8] & 0x3F | 0x80  // RFC 4122 variant
        return UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
                bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }
}
