/// The `apns-push-type` header values a content-free signal can use.
public enum APNsPushType: String, Sendable, Hashable {
    /// A user-visible notification (a badge change).
    case alert
    /// A silent `content-available` wake-up.
    case background
}

/// The `apns-priority` header.
public enum APNsPriority: Int, Sendable, Hashable {
    /// Deliver considering the device's power (required for background pushes).
    case conservePower = 5
    /// Deliver at once.
    case immediate = 10
}
