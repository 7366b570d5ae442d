import Foundation
import Locking

/// A GOAWAY frame the server should send: its error code and optional debug data.
public struct HTTP2GoAway: Sendable, Hashable {
    /// The HTTP/2 error code (`0` is `NO_ERROR`, `2` is `INTERNAL_ERROR`, …).
    public var errorCode: UInt32
    /// Opaque debug data carried in the frame (APNs sends a JSON `{"reason": …}` here).
    public var debugData: Data

    /// Creates a GOAWAY description; the default is a plain `NO_ERROR` GOAWAY.
    public init(errorCode: UInt32 = 0, debugData: Data = Data()) {
        self.errorCode = errorCode
        self.debugData = debugData
    }
}

/// A complete HTTP/2 request as handed to the application's handler.
public struct HTTP2Request: Sendable {
    /// The `:method` pseudo-header, e.g. `POST`.
    public var method: String
    /// The `:path` pseudo-header including any query, e.g. `/3/device/abc`.
    public var path: String
    /// The `:authority` pseudo-header, if sent.
    public var authority: String?
    /// The `:scheme` pseudo-header, if sent.
    public var scheme: String?
    /// The regular header fields in arrival order (names lowercase; pseudo-headers excluded).
    public var headers: [HTTPField]
    /// The request body.
    public var body: Data
    /// Identifies the connection the request came on; unique for the life of the server.
    public var connectionID: UInt64
    /// The HTTP/2 stream identifier of the request.
    public var streamID: Int
    /// The peer's address as `ip:port`.
    public var remoteAddress: String

    let control: StreamControl

    /// Creates a request value, e.g. to call a handler directly in unit tests.
    public init(
        method: String, path: String, authority: String? = nil, scheme: String? = "https",
        headers: [HTTPField] = [], body: Data = Data(), connectionID: UInt64 = 0, streamID: Int = 1,
        remoteAddress: String = "127.0.0.1:0"
    ) {
        self.init(
            method: method, path: path, authority: authority, scheme: scheme, headers: headers, body: body,
            connectionID: connectionID, streamID: streamID, remoteAddress: remoteAddress, control: StreamControl())
    }

    init(
        method: String, path: String, authority: String?, scheme: String?, headers: [HTTPField], body: Data,
        connectionID: UInt64, streamID: Int, remoteAddress: String, control: StreamControl
    ) {
        self.method = method
        self.path = path
        self.authority = authority
        self.scheme = scheme
        self.headers = headers
        self.body = body
        self.connectionID = connectionID
        self.streamID = streamID
        self.remoteAddress = remoteAddress
        self.control = control
    }

    /// The GOAWAY requested through ``goAwayAfterResponse(_:)``, if any.
    public var requestedGoAway: HTTP2GoAway? { control.goAway.withLock { $0 } }

    /// The value of the first header named `name` (compared case-insensitively), if any.
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name == lowered }?.value
    }

    /// Asks the server to send GOAWAY on this request's connection once this request's response is
    /// complete; streams already in flight may finish, new ones are refused, then the connection closes.
    public func goAwayAfterResponse(_ goAway: HTTP2GoAway = HTTP2GoAway()) {
        control.goAway.withLock { $0 = goAway }
    }
}

/// The per-request channel from the handler back to the server (thread-safe through its mutex).
final class StreamControl: Sendable {
    let goAway = LockedValue<HTTP2GoAway?>(nil)
}

/// What the handler answers: status, header fields and body.
public struct HTTP2Response: Sendable {
    /// The HTTP status code.
    public var status: Int
    /// Header fields to send; names are lowercased, connection-specific fields are dropped, and
    /// `content-length` is added when absent.
    public var headers: [HTTPField]
    /// The response body (may be empty).
    public var body: Data
    /// When set, the server sends this GOAWAY on the connection after the response is complete
    /// (same effect as ``HTTP2Request/goAwayAfterResponse(_:)``).
    public var goAway: HTTP2GoAway?
    /// How long the server holds an inline handler's response back before sending it (the stream stays open
    /// meanwhile; other streams go on), so it can answer late without blocking the event loop. An async
    /// handler sleeps itself instead; this field is ignored for its responses.
    public var delay: Duration

    /// Creates a response.
    public init(
        status: Int = 200, headers: [HTTPField] = [], body: Data = Data(), goAway: HTTP2GoAway? = nil,
        delay: Duration = .zero
    ) {
        self.status = status
        self.headers = headers
        self.body = body
        self.goAway = goAway
        self.delay = delay
    }
}
