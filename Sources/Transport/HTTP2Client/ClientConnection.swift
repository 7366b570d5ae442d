import CEpoll
import CNGHTTP2
import ConnectionLoop
import Foundation
import HTTP2Support

/// One connection to the origin: its socket, optional TLS engine, nghttp2 client session and open streams.
/// Confined to the I/O thread; nghttp2 callbacks reach it through `Unmanaged` user data.
final class ClientConnection {
    enum State {
        case resolving
        case connecting
        /// Through a proxy: `CONNECT` sent, its answer awaited.
        case tunnelling
        case handshaking
        /// The session is up; requests wait for the server's first SETTINGS (its stream limit).
        case waitingForSettings
        case ready
        case closed
    }

    let id: UInt64
    let origin: Origin
    private let scheme: String
    private let authority: String
    unowned let loop: ClientLoop
    private let tlsContext: ClientTLSContext?
    private let connectDeadline: UInt64
    private(set) var state = State.resolving
    private var fd: Int32 = -1
    private var addresses: [(storage: sockaddr_storage, length: socklen_t)] = []
    private var lastConnectError = ""
    /// Through a proxy: what the proxy is asked to `CONNECT` to (`host:port`), and its answer so far.
    private var tunnelTarget: String?
    private var tunnelAnswer: [UInt8] = []
    private var tunnelOpen = false
    private var tls: TLSEngine?
    var session: OpaquePointer?
    private var output = OutputBuffer()
    var streams: [Int32: PendingRequest] = [:] {
        didSet { lastLookup = nil }
    }
    /// The stream the last callback looked up: nghttp2 calls back for one stream's headers and data in a row, so
    /// most lookups need no hashing. Cleared whenever `streams` changes.
    private var lastLookup: (id: Int32, request: PendingRequest)?
    private var interest: UInt32 = 0
    /// Why the connection ended, when it failed.
    private(set) var failure: HTTPClientError?
    /// Whether the server's SETTINGS arrived at some point.
    private(set) var becameReady = false
    /// The server sent GOAWAY: no new streams; the open ones below its last stream id finish.
    var goingAway = false

    /// Stop generating frames once this many bytes wait for the socket.
    private static let highWater = 256 * 1024
    private static let maxHeaderBytes = 64 * 1024

    init(id: UInt64, origin: Origin, loop: ClientLoop, tlsContext: ClientTLSContext?, connectDeadline: UInt64) {
        self.id = id
        self.origin = origin
        scheme = origin.isTLS ? "https" : "http"
        authority = origin.authority
        self.loop = loop
        self.tlsContext = tlsContext
        self.connectDeadline = connectDeadline
    }

    deinit {
        if let session { nghttp2_session_del(session) }
        if fd >= 0 { Glibc.close(fd) }
    }

    var isClosed: Bool { state == .closed }
    var isOpening: Bool { state != .ready && state != .closed }
    var acceptsNewStreams: Bool { state == .ready && !goingAway }
    var streamCount: Int { streams.count }
    /// Whether the session has ended on its own (GOAWAY received and no streams left).
    var isDone: Bool { goingAway && streams.isEmpty && output.isEmpty }

    var hasRoomForStream: Bool {
        guard acceptsNewStreams, let session else { return false }
        let remote = Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
        return streams.count < min(remote, loop.configuration.maximumConcurrentStreams)
    }

    // MARK: Opening

    /// Resolves the host (on this thread: a reconnect waits for the resolver) and starts connecting: to the origin,
    /// or to the proxy with a tunnel to the origin's name or to its checked address (``HTTP2Client/Proxy``).
    func start() {
        let configuration = loop.configuration
        guard let proxy = configuration.proxy, proxy.applies(to: origin.host) else {
            guard resolve(origin.host, port: origin.port, checked: true) != nil else { return }
            connectNextAddress()
            return
        }
        if configuration.permitsAddress != nil {
            guard let checked = resolve(origin.host, port: origin.port, checked: true) else { return }
            let numeric = checked[0].numeric
            tunnelTarget = numeric.contains(":") ? "[\(numeric)]:\(origin.port)" : "\(numeric):\(origin.port)"
            addresses = []
        } else {
            tunnelTarget =
                origin.host.contains(":") ? "[\(origin.host)]:\(origin.port)" : "\(origin.host):\(origin.port)"
        }
        guard resolve(proxy.host, port: proxy.port, checked: false) != nil else { return }
        connectNextAddress()
    }

    /// Fills `addresses` with what `host` resolves to (`checked`: only those ``HTTP2Client/Configuration/permitsAddress``
    /// allows) and returns them; fails the connection and returns `nil` when none is left.
    @discardableResult
    private func resolve(_ host: String, port: Int, checked: Bool) -> [HTTP2Client.ResolvedAddress]? {
        do throws(HTTPClientError) {
            let found = try HTTP2Client.resolve(
                host, port: port, permits: checked ? loop.configuration.permitsAddress : nil)
            addresses = found.map { ($0.storage, $0.length) }
            return found
        } catch {
            fail(error)
            return nil
        }
    }

    private func connectNextAddress() {
        while !addresses.isEmpty {
            var (storage, length) = addresses.removeFirst()
            let socketFD = socket(
                Int32(storage.ss_family),
                Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            if socketFD < 0 {
                lastConnectError = String(cString: strerror(errno))
                continue
            }
            var one: Int32 = 1
            _ = setsockopt(socketFD, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let result = withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socketFD, $0, length) }
            }
            if result != 0 && errno != EINPROGRESS {
                lastConnectError = String(cString: strerror(errno))
                Glibc.close(socketFD)
                continue
            }
            fd = socketFD
            state = .connecting
            interest = EPOLLOUT.rawValue
            guard loop.poller.add(fd, tag: id, events: interest) else {
                fail(.connectionFailed("epoll_ctl: \(String(cString: strerror(errno)))"))
                return
            }
            return
        }
        let target = tunnelTarget == nil ? origin.authority : "the proxy \(loop.configuration.proxy?.displayName ?? "")"
        fail(.connectionFailed("cannot connect to \(target): \(lastConnectError)"))
    }

    private func connected() {
        if let tunnelTarget, !tunnelOpen {
            var request = "CONNECT \(tunnelTarget) HTTP/1.1\r\nHost: \(tunnelTarget)\r\n"
            if let authorization = loop.configuration.proxy?.authorization {
                request += "Proxy-Authorization: \(authorization)\r\n"
            }
            request += "\r\n"
            state = .tunnelling
            Array(request.utf8).withUnsafeBytes { output.append($0) }
            return
        }
        if let tlsContext {
            do throws(HTTPClientError) {
                let engine = try tlsContext.makeEngine(host: origin.host)
                tls = engine
                state = .handshaking
                if engine.continueHandshake() == .failed {
                    fail(tlsContext.check(engine, handshakeFailed: true) ?? .tlsFailure("handshake failed"))
                    return
                }
                engine.drainCiphertext(into: &output)
            } catch {
                fail(error)
            }
        } else {
            startSession()
        }
    }

    private func startSession() {
        var created: OpaquePointer?
        let userData = Unmanaged.passUnretained(self).toOpaque()
        guard nghttp2_session_client_new(&created, loop.callbacks, userData) == 0, let created else {
            fail(.connectionFailed("nghttp2_session_client_new failed"))
            return
        }
        session = created
        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: 1 << 20),
        ]
        guard nghttp2_submit_settings(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count) == 0,
            nghttp2_session_set_local_window_size(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, 1 << 24) == 0
        else {
            fail(.connectionFailed("cannot start the HTTP/2 session"))
            return
        }
        state = .waitingForSettings
    }

    /// The server's first SETTINGS arrived: streams may open.
    func settingsReceived() {
        guard state == .waitingForSettings else { return }
        state = .ready
        becameReady = true
    }

    // MARK: Events

    func handle(events: UInt32) {
        if state == .connecting {
            guard events & (EPOLLOUT.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 else { return }
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            if error != 0 {
                lastConnectError = String(cString: strerror(error))
                loop.poller.remove(fd)
                Glibc.close(fd)
                fd = -1
                connectNextAddress()
                return
            }
            connected()
            return
        }
        let readable = EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue | EPOLLRDHUP.rawValue
        if events & readable != 0 { readFromSocket() }
    }

    private func readFromSocket() {
        let end = SocketIO.read(fd, into: loop.readBuffer, budget: 256 * 1024) { bytes in
            receive(bytes)
            return state != .closed
        }
        // Through a proxy, each read is acknowledged at once: a proxy that relays in small writes without
        // TCP_NODELAY (tinyproxy) waits for the acknowledgement of one before sending the next, and a delayed
        // acknowledgement here held each answer back by up to 40 ms. (Linux clears the flag by itself, so it is set
        // again after every read.)
        if tunnelTarget != nil, state != .closed {
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_QUICKACK, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        switch end {
        case .drained, .stopped: break
        case .peerClosed: fail(.connectionLost("the server closed the connection"))
        case .failed(let code): fail(.connectionLost(String(cString: strerror(code))))
        }
    }

    private func receive(_ bytes: UnsafeRawBufferPointer) {
        if state == .tunnelling {
            receiveTunnelAnswer(bytes)
            return
        }
        guard let tls else {
            feed(bytes)
            return
        }
        let outcome = tls.receive(
            bytes, output: &output, scratch: loop.plaintextBuffer,
            handshakeDone: {
                if let problem = tlsContext?.check(tls, handshakeFailed: false) {
                    fail(problem)
                    return false
                }
                startSession()
                return state != .closed
            },
            feed: { chunk in
                feed(chunk)
                return state != .closed
            })
        switch outcome {
        case .ok: break
        case .closed: fail(.connectionLost("the server closed the TLS session"))
        case .failed where !tls.handshakeComplete:
            fail(tlsContext?.check(tls, handshakeFailed: true) ?? .tlsFailure("handshake failed"))
        case .failed: fail(.connectionLost("TLS error"))
        }
    }

    /// The proxy's answer to `CONNECT`: a 2xx opens the tunnel, and TLS (or the h2c session) starts inside it;
    /// anything else fails the connection with the status (never the credentials).
    private func receiveTunnelAnswer(_ bytes: UnsafeRawBufferPointer) {
        tunnelAnswer.append(contentsOf: bytes)
        let end = Array("\r\n\r\n".utf8)
        guard let headEnd = tunnelAnswer.firstRange(of: end) else {
            if tunnelAnswer.count > Self.maxTunnelAnswer {
                fail(.connectionFailed("the proxy's answer to CONNECT is longer than \(Self.maxTunnelAnswer) bytes"))
            }
            return
        }
        let statusLine = tunnelAnswer[..<headEnd.lowerBound].split(separator: UInt8(ascii: "\r")).first ?? []
        let words = statusLine.split(separator: UInt8(ascii: " "))
        guard words.count >= 2, words[0].starts(with: Array("HTTP/1.".utf8)),
            let status = Int(String(decoding: words[1], as: UTF8.self))
        else {
            fail(.connectionFailed("the proxy did not answer CONNECT with HTTP/1.1"))
            return
        }
        guard (200..<300).contains(status) else {
            fail(.connectionFailed("the proxy refused the tunnel: HTTP \(status)"))
            return
        }
        let rest = Array(tunnelAnswer[headEnd.upperBound...])
        tunnelAnswer = []
        tunnelOpen = true
        connected()
        if !rest.isEmpty, state != .closed { rest.withUnsafeBytes { receive($0) } }
    }

    private static let maxTunnelAnswer = 16 * 1024

    private func feed(_ bytes: UnsafeRawBufferPointer) {
        guard let session, state != .closed, bytes.count > 0 else { return }
        let result = nghttp2_session_mem_recv(
            session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        if result < 0 {
            fail(.connectionLost("HTTP/2 protocol error: \(String(cString: nghttp2_strerror(Int32(result))))"))
        }
    }

    // MARK: Writing

    /// Moves frames from nghttp2 to the socket until nghttp2 has nothing more or the socket is full.
    func flush() {
        guard state != .closed, fd >= 0, state != .connecting else { return }
        while true {
            var produced = 0
            if let session, state == .ready || state == .waitingForSettings {
                produced = generate(session)
            }
            let drained = sendPending()
            if produced == 0 || !drained { return }
        }
    }

    private func generate(_ session: OpaquePointer) -> Int {
        switch SocketIO.generateFrames(
            session, tls: tls, staging: loop.staging, output: &output, highWater: ClientConnection.highWater)
        {
        case .success(let produced):
            return produced
        case .failure(.nghttp2(let code)):
            fail(.connectionLost("HTTP/2 protocol error: \(String(cString: nghttp2_strerror(code)))"))
            return 0
        case .failure(.tls):
            fail(.connectionLost("TLS write failed"))
            return 0
        }
    }

    /// Writes queued bytes; returns whether the queue is now empty.
    private func sendPending() -> Bool {
        guard state != .closed else { return false }
        switch SocketIO.write(fd, from: &output) {
        case .drained: return true
        case .blocked: return false
        case .failed(let code):
            fail(.connectionLost(String(cString: strerror(code))))
            return false
        }
    }

    /// Waits for writability only while bytes are queued (or the connect is pending).
    func updateInterest() {
        guard fd >= 0, state != .closed else { return }
        var wanted: UInt32
        if state == .connecting {
            wanted = EPOLLOUT.rawValue
        } else {
            wanted = EPOLLIN.rawValue | EPOLLRDHUP.rawValue
            if !output.isEmpty { wanted |= EPOLLOUT.rawValue }
        }
        guard wanted != interest else { return }
        if loop.poller.modify(fd, tag: id, events: wanted) { interest = wanted }
    }

    // MARK: Streams

    /// Submits `request` as a new stream (the caller checked ``hasRoomForStream``).
    func openStream(for request: PendingRequest) {
        guard let session else { return }
        let body = request.request.body
        var fields: [(String, String)] = [
            (":method", request.request.method), (":scheme", scheme), (":authority", authority),
            (":path", request.request.path),
        ]
        fields.reserveCapacity(request.request.headers.count + 5)
        var hasLength = false
        for header in request.request.headers {
            let name = RequestValidation.wireName(header.name)
            if name == "content-length" { hasLength = true }
            fields.append((name, header.value))
        }
        if !body.isEmpty && !hasLength { fields.append(("content-length", String(body.count))) }
        let streamID = withHeaderBlock(fields) { nva, count in
            if body.isEmpty {
                return nghttp2_submit_request(session, nil, nva, count, nil, nil)
            }
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readRequestBody)
            return nghttp2_submit_request(session, nil, nva, count, &provider, nil)
        }
        guard streamID > 0 else {
            request.finish(
                .failure(.invalidRequest("nghttp2 refused the request: \(String(cString: nghttp2_strerror(streamID)))"))
            )
            return
        }
        request.streamID = streamID
        streams[streamID] = request
    }

    /// Resets `request`'s stream when it is on this connection; returns whether it was.
    func cancelStream(of request: PendingRequest) -> Bool {
        guard streams[request.streamID] === request else { return false }
        streams[request.streamID] = nil
        if let session, state != .closed {
            _ = nghttp2_submit_rst_stream(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), request.streamID, NGHTTP2_CANCEL.rawValue)
        }
        return true
    }

    func checkDeadlines(now: UInt64) {
        if isOpening && now >= connectDeadline {
            fail(.timeout)
            return
        }
        for request in Array(streams.values) where now >= request.deadline {
            _ = cancelStream(of: request)
            request.finish(.failure(.timeout))
        }
    }

    /// Ends the connection with `error`: every open stream fails with it.
    func fail(_ error: HTTPClientError) {
        guard state != .closed else { return }
        if failure == nil { failure = error }
        state = .closed
        let open = streams.values
        streams = [:]
        for request in open { request.finish(.failure(error)) }
        closeSocket()
    }

    /// Closes the socket without failing anything (the caller has dealt with the streams).
    func close() {
        state = .closed
        closeSocket()
    }

    private func closeSocket() {
        guard fd >= 0 else { return }
        loop.poller.remove(fd)
        Glibc.close(fd)
        fd = -1
    }

    // MARK: nghttp2 callbacks

    func onHeader(_ streamID: Int32, _ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) -> Int32 {
        guard let request = stream(streamID) else { return 0 }
        request.headerBytes += name.count + value.count + 32
        if request.headerBytes > ClientConnection.maxHeaderBytes {
            request.failure = .connectionLost("response headers larger than \(ClientConnection.maxHeaderBytes) bytes")
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
        }
        if name.count == 7 && name.elementsEqual(":status".utf8) {
            request.status = Self.status(value)
            request.headers = []  // a final response replaces any informational (1xx) one
            return 0
        }
        request.headers.append(
            HTTPField(String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
        return 0
    }

    /// The open stream `id`'s request.
    private func stream(_ id: Int32) -> PendingRequest? {
        if let lastLookup, lastLookup.id == id { return lastLookup.request }
        guard let request = streams[id] else { return nil }
        lastLookup = (id, request)
        return request
    }

    /// A `:status` value: three digits (anything else is 0, which no response completes with).
    private static func status(_ value: UnsafeBufferPointer<UInt8>) -> Int {
        guard value.count == 3 else { return 0 }
        var status = 0
        for byte in value {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return 0 }
            status = status * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return status
    }

    func onDataChunk(_ streamID: Int32, _ data: UnsafeRawBufferPointer) -> Int32 {
        guard let request = stream(streamID), request.failure == nil else { return 0 }
        let limit = loop.configuration.maximumResponseBodySize
        if request.body.count + data.count > limit {
            request.failure = .responseTooLarge(limit: limit)
            if let session {
                _ = nghttp2_submit_rst_stream(
                    session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_CANCEL.rawValue)
            }
            return 0
        }
        request.body.append(contentsOf: data)
        return 0
    }

    func onGoAway() {
        goingAway = true
    }

    func onStreamClose(_ streamID: Int32, _ errorCode: UInt32) -> Int32 {
        guard let request = streams.removeValue(forKey: streamID) else { return 0 }
        if let failure = request.failure {
            request.finish(.failure(failure))
        } else if errorCode == NGHTTP2_NO_ERROR.rawValue && request.status >= 200 {
            request.finish(
                .success(HTTP2Client.Response(status: request.status, headers: request.headers, body: request.body)))
        } else if errorCode == NGHTTP2_REFUSED_STREAM.rawValue {
            // Not processed by the server (GOAWAY or refused): safe to send again, once.
            if request.attempts < 2 {
                loop.requeue(request)
            } else {
                request.finish(.failure(goingAway ? .goAway(errorCode: errorCode) : .streamReset(errorCode: errorCode)))
            }
        } else {
            request.finish(.failure(.streamReset(errorCode: errorCode)))
        }
        return 0
    }

    /// Copies the next part of `streamID`'s request body into nghttp2's buffer.
    func readBody(
        _ streamID: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int, flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        guard let request = streams[streamID] else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        let body = request.request.body
        let count = min(length, body.count - request.bodyOffset)
        if count > 0 {
            body.withUnsafeBufferPointer { source in
                buffer.update(from: source.baseAddress! + request.bodyOffset, count: count)
            }
            request.bodyOffset += count
        }
        if request.bodyOffset >= body.count { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        return count
    }
}

/// nghttp2 data source for request bodies.
private func readRequestBody(
    _ session: OpaquePointer?, _ streamID: Int32, _ buffer: UnsafeMutablePointer<UInt8>?, _ length: Int,
    _ flags: UnsafeMutablePointer<UInt32>?, _ source: UnsafeMutablePointer<nghttp2_data_source>?,
    _ userData: UnsafeMutableRawPointer?
) -> Int {
    guard let userData, let buffer, let flags else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
    return Unmanaged<ClientConnection>.fromOpaque(userData).takeUnretainedValue().readBody(
        streamID, into: buffer, length: length, flags: flags)
}

private let headersType = UInt8(NGHTTP2_HEADERS.rawValue)
private let settingsType = UInt8(NGHTTP2_SETTINGS.rawValue)
private let goAwayType = UInt8(NGHTTP2_GOAWAY.rawValue)
private let ackFlag = UInt8(NGHTTP2_FLAG_ACK.rawValue)

/// The nghttp2 callbacks shared by every session of a client; each recovers its `ClientConnection` from the
/// session's user data.
func makeClientCallbacks() -> OpaquePointer? {
    var created: OpaquePointer?
    guard nghttp2_session_callbacks_new(&created) == 0, let callbacks = created else { return nil }
    nghttp2_session_callbacks_set_on_header_callback(callbacks) {
        _, frame, name, nameLength, value, valueLength, _, userData in
        guard let frame, let userData, let name, let value, frame.pointee.hd.type == headersType else { return 0 }
        return Unmanaged<ClientConnection>.fromOpaque(userData).takeUnretainedValue().onHeader(
            frame.pointee.hd.stream_id, UnsafeBufferPointer(start: name, count: nameLength),
            UnsafeBufferPointer(start: value, count: valueLength))
    }
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, userData in
        guard let userData, let data else { return 0 }
        return Unmanaged<ClientConnection>.fromOpaque(userData).takeUnretainedValue().onDataChunk(
            streamID, UnsafeRawBufferPointer(start: data, count: length))
    }
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
        guard let frame, let userData else { return 0 }
        let connection = Unmanaged<ClientConnection>.fromOpaque(userData).takeUnretainedValue()
        switch frame.pointee.hd.type {
        case settingsType where frame.pointee.hd.flags & ackFlag == 0: connection.settingsReceived()
        case goAwayType: connection.onGoAway()
        default: break
        }
        return 0
    }
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, userData in
        guard let userData else { return 0 }
        return Unmanaged<ClientConnection>.fromOpaque(userData).takeUnretainedValue().onStreamClose(streamID, errorCode)
    }
    return callbacks
}
