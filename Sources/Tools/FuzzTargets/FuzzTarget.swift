import Foundation

/// Every parser of untrusted input the fuzzer drives, by the name `Scripts/fuzz` and `signalfetch-fuzz` use.
///
/// A target gets one input and traps when an invariant breaks: a crash, a sanitizer report, a 5xx for bad
/// input, or two parsers that must agree disagreeing. The same functions replay the seed corpora and the
/// inputs of earlier crashes (`Tests/Fuzz/<target>/`) in the ordinary test build.
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// mailboxd's payload guard against `JSONSerialization`.
    case payloadGuard = "payload-guard"
    /// apns-sim's byte-level payload scan against its `JSONSerialization` answer.
    case payloadCheck = "payload-check"
    /// mailboxd's JSON request bodies, each endpoint through the real router and store.
    case apiBodies = "api-bodies"
    /// State strings, as the store parses them and as signals carry them.
    case state = "state"
    /// JWT parsing and ES256 verification, and apns-sim's provider-token check.
    case jwt = "jwt"
    /// The Server-Sent Events parser, whole and in arbitrary chunks.
    case sse = "sse"
    /// APNs response bodies and `Retry-After` headers.
    case apnsResponse = "apns-response"
    /// apns-sim's provider request path: headers, path, payload.
    case providerRequest = "provider-request"
    /// HTTP/2 frames fed to HTTP2Server over cleartext (h2c) on loopback.
    case http2Frames = "http2-frames"
    /// Raw HTTP/1.1 requests to mailboxd's router on HTTPServer over loopback.
    case http1Requests = "http1-requests"
    /// RFC 5322 / MIME messages through GMime: every listed part can be fetched.
    case mime = "mime"
    /// LMTP sessions, whole and cut into pieces.
    case lmtp = "lmtp"
    /// IMAP sessions: commands, literals, FETCH sections over an in-memory mailbox, whole and cut into pieces.
    case imap = "imap"
    /// JMAP request bodies: JSON read with the depth cap, never laxer than `JSONSerialization`, written back the
    /// same.
    case jmapJSON = "jmap-json"
    /// A JMAP WebSocket's opening handshake (http-parser) and frames (wslay), whole and cut into pieces.
    case webSocket = "websocket"

    /// Runs the target on one input.
    public func run(_ input: UnsafeRawBufferPointer) {
        let bytes = Data(input)
        switch self {
        case .payloadGuard: PayloadFuzz.guardAgainstFoundation(bytes)
        case .payloadCheck: PayloadFuzz.scanAgainstFoundation(bytes)
        case .apiBodies: APIFuzz.shared.request(bytes)
        case .state: TextFuzz.state(bytes)
        case .jwt: TextFuzz.jwt(bytes)
        case .sse: TextFuzz.serverSentEvents(bytes)
        case .apnsResponse: TextFuzz.apnsResponse(bytes)
        case .providerRequest: TextFuzz.providerRequest(bytes)
        case .http2Frames: ServerFuzz.http2.send(bytes)
        case .http1Requests: ServerFuzz.http1.send(bytes)
        case .mime: MailFuzz.mime(bytes)
        case .lmtp: MailFuzz.lmtp(bytes)
        case .imap: IMAPFuzz.session(bytes)
        case .jmapJSON: TextFuzz.jmapJSON(bytes)
        case .webSocket: WebSocketFuzz.session(bytes)
        }
    }
}

/// Stops the run with what broke; the fuzzer records the input that led here.
func violated(_ what: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) -> Never {
    preconditionFailure("fuzz invariant: \(what())", file: file, line: line)
}

/// Splits an input in two at a position its first byte picks, for targets that take two values.
func split(_ bytes: Data) -> (Data, Data) {
    guard let first = bytes.first else { return (Data(), Data()) }
    let rest = bytes.dropFirst()
    let cut = rest.startIndex + Int(first) % (rest.count + 1)
    return (Data(rest[rest.startIndex..<cut]), Data(rest[cut...]))
}
