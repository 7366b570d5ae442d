import CWslay

/// A whole message a WebSocket peer sent (RFC 6455 §5.6), or its closing handshake.
package enum WebSocketMessage: Equatable, Sendable {
    /// A text message (its UTF-8 already checked).
    case text([UInt8])
    /// A binary message.
    case binary([UInt8])
    /// The peer's Close frame, with its status code (1005: it gave none). The answering Close is already queued.
    case close(code: UInt16)
}

/// RFC 6455 framing for the server's end of one connection, over wslay: bytes in, whole messages out, frames out.
/// It does no I/O (STYLE 12): whoever owns the socket feeds it what arrived (``receive(_:)``) and writes what
/// ``takeOutput()`` returns. wslay answers pings, reassembles fragments and refuses, with RFC 6455 §7.4.1's close
/// codes, unmasked client frames (1002), text that is not UTF-8 (1007) and a message over the limit (1009).
///
/// One connection's, used from one thread at a time.
package final class WebSocketCodec {
    private var context: wslay_event_context_ptr?
    /// The bytes being fed, while ``receive(_:)`` runs.
    private var input = UnsafeRawBufferPointer(start: nil, count: 0)
    private var output: [UInt8] = []
    private var messages: [WebSocketMessage] = []
    /// wslay failed outright (out of memory): the connection can only be dropped.
    package private(set) var failed = false

    /// A codec that refuses messages over `maxMessageBytes`.
    package init(maxMessageBytes: Int) {
        var callbacks = wslay_event_callbacks(
            recv_callback: webSocketRead, send_callback: webSocketWrite, genmask_callback: nil,
            on_frame_recv_start_callback: nil, on_frame_recv_chunk_callback: nil, on_frame_recv_end_callback: nil,
            on_msg_recv_callback: webSocketMessageArrived)
        let status = wslay_event_context_server_init(&context, &callbacks, Unmanaged.passUnretained(self).toOpaque())
        if status != 0 {
            context = nil
            failed = true
        } else {
            wslay_event_config_set_max_recv_msg_length(context, UInt64(max(1, maxMessageBytes)))
        }
    }

    deinit { if let context { wslay_event_context_free(context) } }

    /// Feeds what the peer sent; returns the messages it completed, in order. Frames wslay answers by itself (pong, a
    /// refusal's Close) are queued for ``takeOutput()``.
    package func receive(_ bytes: UnsafeRawBufferPointer) -> [WebSocketMessage] {
        guard let context, !failed else { return [] }
        input = bytes
        defer { input = UnsafeRawBufferPointer(start: nil, count: 0) }
        if wslay_event_recv(context) != 0 { failed = true }
        flush()
        defer { messages = [] }
        return messages
    }

    /// Queues a text message (`bytes` must be UTF-8); false once a Close was sent.
    @discardableResult
    package func send(text bytes: [UInt8]) -> Bool { queue(opcode: UInt8(WSLAY_TEXT_FRAME.rawValue), bytes) }

    /// Queues a Ping with `payload` (at most 125 bytes).
    @discardableResult
    package func sendPing(_ payload: [UInt8] = []) -> Bool {
        queue(opcode: UInt8(WSLAY_PING.rawValue), Array(payload.prefix(125)))
    }

    /// Queues the server's Close with `code` and a reason (cut to RFC 6455's 123 bytes).
    package func close(code: UInt16, reason: String) {
        guard let context, !failed else { return }
        var reason = Array(reason.utf8.prefix(123))
        while !reason.isEmpty, String(validating: reason, as: UTF8.self) == nil { reason.removeLast() }
        _ = reason.withUnsafeBufferPointer { wslay_event_queue_close(context, code, $0.baseAddress, $0.count) }
        flush()
    }

    /// The frames to write to the socket, taken.
    package func takeOutput() -> [UInt8] {
        defer { output = [] }
        return output
    }

    /// Both Close frames have passed (or wslay gave up): the connection is over once the output is written.
    package var isFinished: Bool {
        guard let context, !failed else { return true }
        return wslay_event_want_read(context) == 0 && wslay_event_want_write(context) == 0
    }

    /// Whether the server already sent its Close.
    package var closeSent: Bool {
        guard let context else { return true }
        return wslay_event_get_close_sent(context) != 0
    }

    private func queue(opcode: UInt8, _ bytes: [UInt8]) -> Bool {
        guard let context, !failed, wslay_event_get_close_sent(context) == 0 else { return false }
        let status = bytes.withUnsafeBufferPointer { buffer in
            var message = wslay_event_msg(opcode: opcode, msg: buffer.baseAddress, msg_length: buffer.count)
            return wslay_event_queue_msg(context, &message)
        }
        flush()
        return status == 0
    }

    /// Has wslay write what it queued (into ``output``: the callback never blocks).
    private func flush() {
        guard let context, !failed else { return }
        if wslay_event_send(context) != 0 { failed = true }
    }

    // MARK: wslay's callbacks

    fileprivate func read(into buffer: UnsafeMutablePointer<UInt8>, count: Int) -> Int {
        guard let context else { return -1 }
        guard !input.isEmpty else {
            wslay_event_set_error(context, WSLAY_ERR_WOULDBLOCK.rawValue)
            return -1
        }
        let taken = min(count, input.count)
        UnsafeMutableRawPointer(buffer).copyMemory(from: input.baseAddress!, byteCount: taken)
        input = UnsafeRawBufferPointer(rebasing: input[taken...])
        return taken
    }

    fileprivate func write(_ bytes: UnsafePointer<UInt8>, count: Int) -> Int {
        output.append(contentsOf: UnsafeBufferPointer(start: bytes, count: count))
        return count
    }

    fileprivate func arrived(_ argument: wslay_event_on_msg_recv_arg) {
        let bytes =
            argument.msg_length == 0 ? [] : Array(UnsafeBufferPointer(start: argument.msg, count: argument.msg_length))
        switch UInt32(argument.opcode) {
        case WSLAY_TEXT_FRAME.rawValue: messages.append(.text(bytes))
        case WSLAY_BINARY_FRAME.rawValue: messages.append(.binary(bytes))
        case WSLAY_CONNECTION_CLOSE.rawValue:
            messages.append(.close(code: argument.status_code == 0 ? 1005 : argument.status_code))
        default: break  // pings are answered by wslay; pongs need nothing
        }
    }
}

private let webSocketRead: wslay_event_recv_callback = { _, buffer, count, _, user in
    guard let buffer, let user else { return -1 }
    return Unmanaged<WebSocketCodec>.fromOpaque(user).takeUnretainedValue().read(into: buffer, count: count)
}

private let webSocketWrite: wslay_event_send_callback = { _, bytes, count, _, user in
    guard let bytes, let user else { return -1 }
    return Unmanaged<WebSocketCodec>.fromOpaque(user).takeUnretainedValue().write(bytes, count: count)
}

private let webSocketMessageArrived: wslay_event_on_msg_recv_callback = { _, argument, user in
    guard let argument, let user else { return }
    Unmanaged<WebSocketCodec>.fromOpaque(user).takeUnretainedValue().arrived(argument.pointee)
}
