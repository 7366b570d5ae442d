import Foundation
import HTTPTypes

/// One request on the provider API, independent of the HTTP/2 library that received it.
public struct APNsProviderRequest: Sendable {
    /// The `:method`, e.g. `POST`.
    public var method: String
    /// The `:path`, e.g. `/3/device/<token>`.
    public var path: String
    /// The regular header fields in arrival order, names in lowercase (as HTTP/2 carries them).
    public var headers: [HTTPField]
    /// The request body (the notification payload).
    public var body: Data
    /// Identifies the HTTP/2 connection the request came on (for the GOAWAY fault).
    public var connectionID: UInt64
    /// The environment of the listener the request arrived on; `nil` when one listener serves both (a
    /// simulator started without a sandbox listener), so any registered token is accepted there.
    public var environment: APNsEnvironment?

    /// Creates a request; header names are lowercased.
    public init(
        method: String, path: String, headers: [HTTPField] = [], body: Data = Data(), connectionID: UInt64 = 0,
        environment: APNsEnvironment? = nil
    ) {
        self.method = method
        self.path = path
        self.headers = headers.map { Self.isLowercaseASCII($0.name) ? $0 : HTTPField($0.name.lowercased(), $0.value) }
        self.body = body
        self.connectionID = connectionID
        self.environment = environment
    }

    /// Identifies the connection among every listener's: each listener numbers its own connections from 1, so
    /// the sandbox listener's get the top bit.
    public var connectionKey: UInt64 {
        environment == .sandbox ? connectionID | (1 << 63) : connectionID
    }

    /// Every value of the header `name` (case-insensitive).
    public func values(_ name: String) -> [String] {
        let lowered = Self.isLowercaseASCII(name) ? name : name.lowercased()
        return headers.filter { $0.name == lowered }.map(\.value)
    }

    /// The first value of the header `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        let lowered = Self.isLowercaseASCII(name) ? name : name.lowercased()
        return headers.first { $0.name == lowered }?.value
    }

    /// Whether `text` is ASCII without uppercase letters (so lowercasing it would change nothing).
    static func isLowercaseASCII(_ text: String) -> Bool {
        PushRequestParser.allBytes(of: text) { $0 < 0x80 && !($0 >= 0x41 && $0 <= 0x5A) }
    }
}

/// The gateway's answer to a ``APNsProviderRequest``.
public struct APNsProviderResponse: Sendable, Equatable {
    /// The HTTP status: 200, or the status of ``reason``.
    public var status: Int
    /// The `apns-id` header value: the request's own, or one the gateway assigned.
    public var apnsID: String
    /// Why the request was refused; `nil` for 200.
    public var reason: RejectionReason?
    /// For 410: when the token stopped being valid, in milliseconds since 1970.
    public var timestamp: Int64?
    /// Whether the connection should be sent GOAWAY after this response (fault injection).
    public var goAway: Bool
    /// How long to hold the response back (fault injection); zero for none.
    public var delay: Duration
    /// The `apns-unique-id` header value: set on the sandbox listener's answers to accepted notifications, as
    /// Apple's development gateway does (it names the notification in the delivery log).
    public var uniqueID: String?

    /// Creates a response.
    public init(
        status: Int, apnsID: String, reason: RejectionReason? = nil, timestamp: Int64? = nil, goAway: Bool = false,
        delay: Duration = .zero, uniqueID: String? = nil
    ) {
        self.status = status
        self.apnsID = apnsID
        self.reason = reason
        self.timestamp = timestamp
        self.goAway = goAway
        self.delay = delay
        self.uniqueID = uniqueID
    }

    /// The response body: empty for 200, else `{"reason":"…"}` plus `"timestamp"` for 410.
    public var body: Data {
        guard let reason else { return Data() }
        if let timestamp { return Data(#"{"reason":"\#(reason.rawValue)","timestamp":\#(timestamp)}"#.utf8) }
        return Data(#"{"reason":"\#(reason.rawValue)"}"#.utf8)
    }
}
