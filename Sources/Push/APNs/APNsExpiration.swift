import Foundation

/// The `apns-expiration` header: until when APNs may store and retry the notification.
public enum APNsExpiration: Sendable, Hashable {
    /// `0`: deliver once if the device is reachable, never store.
    case immediately
    /// A fixed UNIX time in seconds.
    case at(unixSeconds: Int64)
    /// A time relative to when the request is built (the usual choice: one hour).
    case after(Duration)

    /// The default: one hour after sending.
    public static let `default` = APNsExpiration.after(.seconds(3600))

    /// The header value (absolute UNIX seconds) for a request built at `now`.
    public func headerValue(now: Date) -> String {
        switch self {
        case .immediately: return "0"
        case .at(let seconds): return String(max(0, seconds))
        case .after(let duration):
            return String(Int64(now.timeIntervalSince1970) + max(0, duration.components.seconds))
        }
    }
}
