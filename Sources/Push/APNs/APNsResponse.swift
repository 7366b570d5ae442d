/// A notification APNs accepted (status 200).
public struct APNsResponse: Sendable, Hashable {
    /// The `apns-id` APNs answered with (the request's own id when the response has none).
    public var apnsID: String
    /// The `apns-unique-id` header (sandbox only), if present.
    public var uniqueID: String?

    /// Creates a response value.
    public init(apnsID: String, uniqueID: String? = nil) {
        self.apnsID = apnsID
        self.uniqueID = uniqueID
    }
}
