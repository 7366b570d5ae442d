import HTTP2Client

/// Why ``APNsClient/send(_:)`` did not deliver a notification to APNs.
public enum APNsClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// APNs answered with an error status.
    case rejected(APNsError)
    /// The payload failed the ``PayloadGuard`` and was not sent: a defect in the sender, never retried.
    case payloadRejected(PayloadGuardViolation)
    /// The connection failed, broke (including GOAWAY and stream resets) or timed out.
    case transport(HTTPClientError)
    /// No provider token could be made (the signing key failed); the text says why, without key material.
    case providerToken(String)
    /// The calling task was cancelled.
    case cancelled

    /// A one-line explanation that is safe to log (no payload, token or authorization values).
    public var description: String {
        switch self {
        case .rejected(let error): error.description
        case .payloadRejected(let violation): "payload refused before sending: \(violation)"
        case .transport(let error): "APNs transport: \(error)"
        case .providerToken(let reason): "provider token: \(reason)"
        case .cancelled: "cancelled"
        }
    }
}
