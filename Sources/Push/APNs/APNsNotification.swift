import Foundation
import HTTPTypes
import OpenSSLCrypto

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
        self.apnsID = apnsID ?? SecureRandom.uuid()
        self.priority = priority ?? signal.defaultPriority
    }

    /// The request path, `/3/device/<token>`.
    public var path: String { "/3/device/" + deviceToken.hex }

    /// The `apns-*` headers in the order they are sent, for a request built at `now`:
    /// `apns-push-type`, `apns-priority`, `apns-topic`, `apns-expiration`, `apns-id`, then `apns-collapse-id`
    /// when set. Authorization is added by the client.
    public func headers(now: Date) -> [HTTPField] {
        var fields = [
            HTTPField("apns-push-type", signal.pushType.rawValue),
            HTTPField("apns-priority", String(priority.rawValue)),
            HTTPField("apns-topic", topic.rawValue),
            HTTPField("apns-expiration", expiration.headerValue(now: now)),
            HTTPField("apns-id", apnsID.lowercasedText),
        ]
        if let collapseID { fields.append(HTTPField("apns-collapse-id", collapseID.rawValue)) }
        return fields
    }

}
