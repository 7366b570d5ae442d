import CNGHTTP2
import ConnectionLoop
import Foundation
import HTTP2Support

/// Why a connection is being closed.
enum CloseReason {
    /// The peer closed or reset the socket: nothing more can be sent.
    case peerClosed
    /// A socket call failed: nothing more can be sent.
    case socketError
    /// TLS or HTTP/2 protocol violation: send what is queued (alert, GOAWAY), then close.
    case protocolError
    /// The HTTP/2 session is over (GOAWAY exchanged, no streams left).
    case finished
    /// A deadline passed (shutdown grace period, stuck GOAWAY flush, idle handshake).
    case deadline
    /// The HTTP/1.1 relay target closed its side: send what it answered, then close.
    case relayClosed

    var flushesFirst: Bool { self == .protocolError || self == .relayClosed }
}

/// One request/response exchange on a connection. Confined to the event-loop thread.
final class StreamState {
    let id: Int32
    var method: String?
    var path: String?
    var authority: String?
    var scheme: String?
    var headers: [HTTPField] = []
    var headerBytes = 0
    var body = Data()
    /// The client ended its side of the stream.
    var requestComplete = false
    /// The body exceeded the limit; a 413 was (or will be) sent and further data is discarded.
    var rejected = false
    /// Body bytes dropped after the 413.
    var discardedBytes = 0
    /// RST_STREAM was queued for this stream.
    var resetSent = false
    /// A response was submitted to nghttp2.
    var responded = false
    /// The response's last frame was sent.
    var responseComplete = false
    var responseBody = Data()
    var responseOffset = 0
    var task: Task<Void, Never>?
    var control: StreamControl?
    var goAwayAfter: HTTP2GoAway?

    init(id: Int32) { self.id = id }
}

/// One client connection: its socket, optional TLS engine, nghttp2 session and streams.
/// Confined to the event-loop thread; nghttp2 callbacks reach it through `Unmanaged` user data.
final class Connection {
    let id: UInt64
    let fd: Int32
    let remoteAddress: String
    unowned let loop: EventLoop
    let tls: TLSEngine?
    var session: OpaquePointer?
    var output = OutputBuffer()
    var streams: [Int32: StreamState] = [:]
    var lastActivity: UInt64
    var interest: UInt32 = 0
    var closeReason: CloseReason?
    var hardCloseDeadline: UInt64?
    var goAwaySubmitted = false
    /// Set when the client chose HTTP/1.1 over ALPN: the cleartext connection its bytes are relayed to.
    /// The nghttp2 session is gone then.
    var relay: RelayUpstream?

    /// Stop generating (and reading) once this many bytes wait for the socket.
    static let highWater = 256 * 1024

    init(id: UInt64, fd: Int32, remoteAddress: String, loop: EventLoop, tls: TLSEngine?, now: UInt64) {
        self.id = id
        self.fd = fd
        self.remoteAddress = remoteAddress
        self.loop = loop
        self.tls = tls
        self.lastActivity = now
    }

    deinit {
        if let session { nghttp2_session_del(session) }
    }

    /// Creates the nghttp2 session and queues the server's SETTINGS.
    func startSession(callbacks: OpaquePointer, configuration: HTTP2ServerConfiguration) -> Bool {
        var created: OpaquePointer?
        let userData = Unmanaged.passUnretained(self).toOpaque()
        guard nghttp2_session_server_new(&created, callbacks, userData) == 0, let created else { return false }
        session = created
        var settings = [
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                value: UInt32(configuration.maxConcurrentStreams)),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue),
                value: UInt32(configuration.initialWindowSize)),
        ]
        guard nghttp2_submit_settings(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count) == 0 else {
            return false
        }
        if configuration.initialWindowSize > 65_535 {
            _ = nghttp2_session_set_local_window_size(
                created, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(configuration.initialWindowSize))
        }
        return true
    }

    /// Whether HTTP/2 frames can flow (h2c at once, TLS after the handshake).
    var sessionReady: Bool { session != nil && (tls?.handshakeComplete ?? true) }

    func markClose(_ reason: CloseReason) {
        if closeReason == nil || closeReason == .protocolError { closeReason = reason }
    }

    // MARK: Reading

    /// Reads what the socket has (bounded per call, the loop is level-triggered) and feeds it on.
    func readFromSocket(now: UInt64) {
        let end = SocketIO.read(fd, into: loop.readBuffer, budget: 256 * 1024) { bytes in
            lastActivity = now
            receive(bytes)
            return closeReason == nil
        }
        switch end {
        case .drained, .stopped: break
        case .peerClosed: markClose(.peerClosed)
        case .failed: markClose(.socketError)
        }
    }

    private func receive(_ bytes: UnsafeRawBufferPointer) {
        guard let tls else {
            feed(bytes)
            return
        }
        let outcome = tls.receive(
            bytes, output: &output, scratch: loop.plaintextBuffer, handshakeDone: { handshakeCompleted(tls) }
        ) {
            chunk in
            feed(chunk)
            return closeReason == nil
        }
        switch outcome {
        case .ok: break
        case .closed: markClose(.peerClosed)
        case .failed: markClose(.protocolError)
        }
    }

    private func feed(_ bytes: UnsafeRawBufferPointer) {
        if let relay {
            relay.output.append(bytes)
            return
        }
        guard let session, closeReason == nil, bytes.count > 0 else { return }
        let result = nghttp2_session_mem_recv(
            session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        if result < 0 { markClose(.protocolError) }
    }

    // MARK: Writing

    /// Moves frames from nghttp2 to the socket until nghttp2 has nothing more or the socket is full.
    func flush() {
        if let reason = closeReason, !reason.flushesFirst { return }
        if relay != nil {
            flushRelay()
            _ = sendPending()
            return
        }
        guard let session, sessionReady else {
            _ = sendPending()
            return
        }
        while true {
            var produced = 0
            if closeReason == nil {
                produced = generate(session)
            }
            let drained = sendPending()
            if produced == 0 || !drained { return }
        }
    }

    private func generate(_ session: OpaquePointer) -> Int {
        switch SocketIO.generateFrames(
            session, tls: tls, staging: loop.tlsStaging, output: &output, highWater: Connection.highWater)
        {
        case .success(let produced):
            return produced
        case .failure:
            markClose(.protocolError)
            return 0
        }
    }

    /// Writes queued bytes; returns whether the queue is now empty.
    func sendPending() -> Bool {
        switch SocketIO.write(fd, from: &output) {
        case .drained: return true
        case .blocked: return false
        case .failed:
            closeReason = .socketError
            return false
        }
    }

    /// Whether the HTTP/2 session has ended on its own (GOAWAY exchanged and no streams left).
    var sessionFinished: Bool {
        guard let session, sessionReady else { return false }
        return nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 && output.isEmpty
    }

    // MARK: Streams

    /// Queues the response for `stream` (the stream must still be open).
    func submitResponse(_ stream: StreamState, _ response: HTTP2Response, now: UInt64) {
        guard let session, !stream.responded else { return }
        stream.responded = true
        stream.task = nil
        stream.responseBody = response.body
        stream.responseOffset = 0
        if let goAway = response.goAway ?? stream.control?.goAway.withLock({ $0 }) {
            stream.goAwayAfter = goAway
        }
        lastActivity = now
        var fields: [(String, String)] = [(":status", String(response.status))]
        fields.reserveCapacity(response.headers.count + 2)
        var hasLength = false
        for header in response.headers {
            let name = header.name.lowercased()
            if name.hasPrefix(":") || connectionSpecificHeaders.contains(name) { continue }
            if name == "content-length" { hasLength = true }
            fields.append((name, header.value))
        }
        let bodyAllowed = response.status >= 200 && response.status != 204 && response.status != 304
        if !hasLength && bodyAllowed { fields.append(("content-length", String(response.body.count))) }
        let result = withHeaderBlock(fields) { nva, count in
            if response.body.isEmpty || !bodyAllowed {
                return nghttp2_submit_response(session, stream.id, nva, count, nil)
            }
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readResponseBody)
            return nghttp2_submit_response(session, stream.id, nva, count, &provider)
        }
        if result != 0 {
            _ = nghttp2_submit_rst_stream(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, NGHTTP2_INTERNAL_ERROR.rawValue)
        }
    }

    /// Refuses a request whose body is over the limit with `413`.
    func rejectTooLarge(_ stream: StreamState, now: UInt64) {
        guard !stream.rejected else { return }
        stream.rejected = true
        stream.body = Data()
        loop.metrics.withLock { $0.requestsTooLarge += 1 }
        let body = Data(#"{"reason":"PayloadTooLarge"}"#.utf8)
        submitResponse(
            stream, HTTP2Response(status: 413, headers: [HTTPField("content-type", "application/json")], body: body),
            now: now)
    }

    /// Queues a GOAWAY that lets streams up to the last processed one finish.
    func submitGoAway(_ goAway: HTTP2GoAway) {
        guard let session, sessionReady, !goAwaySubmitted else { return }
        goAwaySubmitted = true
        loop.metrics.withLock { $0.goAwaysSent += 1 }
        let lastStream = nghttp2_session_get_last_proc_stream_id(session)
        _ = goAway.debugData.withUnsafeBytes { debug in
            nghttp2_submit_goaway(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStream, goAway.errorCode,
                debug.baseAddress?.assumingMemoryBound(to: UInt8.self), debug.count)
        }
    }

    /// Queues a GOAWAY after which nghttp2 stops reading; the connection closes once it is sent.
    func terminate() {
        guard let session, sessionReady, !goAwaySubmitted else { return }
        goAwaySubmitted = true
        loop.metrics.withLock { $0.goAwaysSent += 1 }
        _ = nghttp2_session_terminate_session(session, NGHTTP2_NO_ERROR.rawValue)
    }
}

/// nghttp2 data source: copies the next part of the stream's response body.
private func readResponseBody(
    _ session: OpaquePointer?, _ streamID: Int32, _ buffer: UnsafeMutablePointer<UInt8>?, _ length: Int,
    _ flags: UnsafeMutablePointer<UInt32>?, _ source: UnsafeMutablePointer<nghttp2_data_source>?,
    _ userData: UnsafeMutableRawPointer?
) -> Int {
    guard let userData, let buffer, let flags else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
    let connection = Unmanaged<Connection>.fromOpaque(userData).takeUnretainedValue()
    guard let stream = connection.streams[streamID] else {
        return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
    }
    let body = stream.responseBody
    let count = min(length, body.count - stream.responseOffset)
    if count > 0 {
        let start = body.startIndex + stream.responseOffset
        body.copyBytes(to: buffer, from: start..<(start + count))
        stream.responseOffset += count
    }
    if stream.responseOffset >= body.count {
        flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
    }
    return count
}
