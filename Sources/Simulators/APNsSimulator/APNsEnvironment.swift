/// One of APNs's two environments. A device token belongs to the environment its app was built for: a
/// development build's token is valid only on the sandbox gateway, an App Store or TestFlight build's only on
/// production, and either gateway answers a token of the other with 400 `BadDeviceToken`.
public enum APNsEnvironment: String, Sendable, Hashable, CaseIterable, Codable {
    /// `api.push.apple.com`: App Store, TestFlight and ad-hoc builds.
    case production
    /// `api.sandbox.push.apple.com`: development builds.
    case sandbox

    /// Reads a registration's environment name; `development` is Apple's other name for the sandbox.
    public init?(name: String) {
        switch name {
        case "production": self = .production
        case "sandbox", "development": self = .sandbox
        default: return nil
        }
    }
}
