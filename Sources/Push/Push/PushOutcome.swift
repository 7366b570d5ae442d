/// What became of one signal, in the push service's own words mapped to what the dispatcher does next.
public enum PushOutcome: Sendable, Equatable {
    /// Accepted by the push service.
    case delivered
    /// The registration is dead (APNs 410 or BadDeviceToken, FCM UNREGISTERED, Web Push 404/410): delete the
    /// device, if the service stopped accepting it after it was last registered (`unregisteredAt`, seconds since
    /// 1970; `nil` when the service does not say).
    case dropRegistration(reason: String, unregisteredAt: Double?)
    /// A transient failure (429, 5xx, connection): try again, no sooner than `retryAfter` seconds when the
    /// service said so. The dispatcher computes the backoff.
    case retry(reason: String, retryAfter: Double?)
    /// The signal can never be sent as it is (a payload the guard refused, a 4xx that is our defect): drop it
    /// and report the defect.
    case defect(reason: String)
}
