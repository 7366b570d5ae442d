import Foundation
import SimulatorSupport

/// Where the gateway sends a simulated browser's messages: one open message stream.
public typealias WebPushMessageSink = DeviceStreamSink

/// How the gateway writes to Mozilla-protocol sockets (the WebSocket listener, or a test's recorder).
public struct MozillaTransport: Sendable {
    /// Queues a text frame for a connection; `false` when it is gone.
    public var send: @Sendable (_ connection: UInt64, _ text: String) -> Bool
    /// Closes a connection with a WebSocket close status once what is queued is written.
    public var close: @Sendable (_ connection: UInt64, _ status: Int32) -> Void

    /// Creates a transport from its two operations.
    public init(
        send: @escaping @Sendable (_ connection: UInt64, _ text: String) -> Bool,
        close: @escaping @Sendable (_ connection: UInt64, _ status: Int32) -> Void
    ) {
        self.send = send
        self.close = close
    }
}

/// A subscription the simulated browser made: what `PushSubscription.toJSON()` would hold.
public struct WebPushCreatedSubscription: Sendable, Equatable {
    /// The subscription's id in the device API.
    public var id: String
    /// The push resource.
    public var endpoint: String
    /// The browser's public key (base64url, 65-byte point).
    public var p256dh: String
    /// The auth secret (base64url, 16 bytes).
    public var auth: String

    /// Creates the description of a subscription.
    public init(id: String, endpoint: String, p256dh: String, auth: String) {
        self.id = id
        self.endpoint = endpoint
        self.p256dh = p256dh
        self.auth = auth
    }
}

/// One subscription as the control API lists it.
public struct WebPushSubscriptionSummary: Sendable, Equatable, Encodable {
    /// Its id.
    public var id: String
    /// `simulated` (the sim holds the keys and decrypts) or `mozilla` (a browser on the WebSocket protocol does).
    public var kind: String
    /// The push resource.
    public var endpoint: String
    /// The key VAPID's `k` must equal (base64url), when the subscription has one.
    public var applicationServerKey: String?
    /// The Mozilla-protocol browser's uaid, for `mozilla` subscriptions.
    public var uaid: String?
    /// The Mozilla-protocol channel, for `mozilla` subscriptions.
    public var channelID: String?
    /// `false` while held offline.
    public var online: Bool
    /// Listeners: open message streams, or 1 while the Mozilla-protocol socket is connected.
    public var listeners: Int
    /// Messages delivered to it.
    public var delivered: Int
    /// Messages kept for it.
    public var stored: Int
    /// The distinct body lengths it was sent, in the order first seen.
    public var bodyLengths: [Int]
    /// Whether every body so far had the same length (RFC 8291 padding hides the plaintext's length only then).
    public var uniformBodyLength: Bool
}

/// A scripted answer for a subscription's next pushes.
public struct WebPushScriptedError: Sendable, Equatable, Codable {
    /// The HTTP status (400–599).
    public var status: Int
    /// How many pushes get it (`nil`: every one).
    public var count: Int?
    /// A `Retry-After` value in seconds.
    public var retryAfter: Int?

    /// Creates a scripted answer.
    public init(status: Int, count: Int? = nil, retryAfter: Int? = nil) {
        self.status = status
        self.count = count
        self.retryAfter = retryAfter
    }
}

/// Whether a subscription id is known.
public enum WebPushSubscriptionStatus: Sendable, Equatable {
    /// Never made.
    case unknown
    /// Live.
    case active
    /// Deleted (pushes get 410).
    case deleted
}
