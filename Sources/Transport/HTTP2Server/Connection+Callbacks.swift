import CNGHTTP2
import Foundation

/// The nghttp2 callbacks shared by every session of a loop. Each one recovers its `Connection`
/// from the session's user data; none of them closes the connection (they only mark it).
func makeSessionCallbacks() -> OpaquePointer? {
    var created: OpaquePointer?
    guard nghttp2_session_callbacks_new(&created) == 0, let callbacks = created else { return nil }
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, userData in
        guard let frame, let userData else { return 0 }
        return Unmanaged<Connection>.fromOpaque(userData).takeUnretainedValue().onBeginHeaders(frame)
    }
    nghttp2_session_callbacks_set_on_header_callback(callbacks) {
        _, frame, name, nameLength, value, valueLength, _, userData in
        guard let frame, let userData, let name, let value else { return 0 }
        return Unmanaged<Connection>.fromOpaque(userData).takeUnretainedValue().onHeader(
            frame, UnsafeBufferPointer(start: name, count: nameLength),
            UnsafeBufferPointer(start: value, count: valueLength))
    }
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) {
        _, _, streamID, data, length, userData in
        guard let userData, let data else { return 0 }
        return Unmanaged<Connection>.fromOpaque(userData).takeUnretainedValue().onDataChunk(
            streamID, UnsafeRawBufferPointer(start: data, count: length))
    }
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
        guard let frame, let userData else { return 0 }
        return Unmanaged<Connection>.fromOpaque(userData).takeUnretainedValue().onFrameReceived(frame)
    }
    nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, userData in
        guard let frame, let userData else { return 0 }
        return Unmanaged<Connection>.fromOpaque(userData).takeUnretainedValue().onFrameSent(frame)
    }
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, userData in
        guard let userData else { return 0 }
        return Unmanaged<Connection>.fromOpaque(userData).takeUnretainedValue().onStreamClose(streamID, errorCode)
    }
    return callbacks
}

private let headersType = UInt8(NGHTTP2_HEADERS.rawValue)
private let dataType = UInt8(NGHTTP2_DATA.rawValue)
private let endStreamFlag = UInt8(NGHTTP2_FLAG_END_STREAM.rawValue)
/// Upper bound for one request's header block (names + values + 32 bytes each, as in HPACK).
private let maxHeaderBytes = 64 * 1024
/// How much of a refused (413) upload is read and dropped before the stream is reset with `NO_ERROR`.
private let maxDiscardedBytes = 16 * 1024 * 1024

extension Connection {
    func onBeginHeaders(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        guard frame.pointee.hd.type == headersType, frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST else { return 0 }
        let streamID = frame.pointee.hd.stream_id
        streams[streamID] = StreamState(id: streamID)
        return 0
    }

    func onHeader(
        _ frame: UnsafePointer<nghttp2_frame>, _ nameBytes: UnsafeBufferPointer<UInt8>,
        _ valueBytes: UnsafeBufferPointer<UInt8>
    ) -> Int32 {
        guard frame.pointee.hd.type == headersType, frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST,
            let stream = streams[frame.pointee.hd.stream_id]
        else { return 0 }
        stream.headerBytes += nameBytes.count + valueBytes.count + 32
        if stream.headerBytes > maxHeaderBytes { return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue }
        let name = String(decoding: nameBytes, as: UTF8.self)
        let value = String(decoding: valueBytes, as: UTF8.self)
        switch name {
        case ":method": stream.method = value
        case ":path": stream.path = value
        case ":authority": stream.authority = value
        case ":scheme": stream.scheme = value
        default:
            if !name.hasPrefix(":") { stream.headers.append(HTTPField(name, value)) }
        }
        return 0
    }

    func onDataChunk(_ streamID: Int32, _ data: UnsafeRawBufferPointer) -> Int32 {
        guard let stream = streams[streamID] else { return 0 }
        if stream.rejected {
            // The 413 is out; the rest of the upload is read and dropped, so clients that finish
            // their upload before reading the response (curl) still see it. Past a bound, stop it.
            stream.discardedBytes += data.count
            if stream.discardedBytes > maxDiscardedBytes, !stream.resetSent, let session {
                stream.resetSent = true
                _ = nghttp2_submit_rst_stream(
                    session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, NGHTTP2_NO_ERROR.rawValue)
            }
            return 0
        }
        if stream.body.count + data.count > loop.configuration.maxRequestBodySize {
            rejectTooLarge(stream, now: loop.now)
        } else {
            stream.body.append(contentsOf: data)
        }
        return 0
    }

    func onFrameReceived(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let type = frame.pointee.hd.type
        guard type == headersType || type == dataType, let stream = streams[frame.pointee.hd.stream_id] else {
            return 0
        }
        if frame.pointee.hd.flags & endStreamFlag != 0 {
            dispatch(stream)
        } else if type == headersType, frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST,
            let declared = stream.headers.first(where: { $0.name == "content-length" }).flatMap({ Int($0.value) }),
            declared > loop.configuration.maxRequestBodySize
        {
            rejectTooLarge(stream, now: loop.now)
        }
        return 0
    }

    func onFrameSent(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let type = frame.pointee.hd.type
        guard type == headersType || type == dataType, frame.pointee.hd.flags & endStreamFlag != 0,
            let stream = streams[frame.pointee.hd.stream_id]
        else { return 0 }
        stream.responseComplete = true
        return 0
    }

    func onStreamClose(_ streamID: Int32, _ errorCode: UInt32) -> Int32 {
        guard let stream = streams.removeValue(forKey: streamID) else { return 0 }
        let served = stream.responseComplete
        if !served { stream.task?.cancel() }
        loop.metrics.withLock { metrics in
            if served { metrics.streamsServed += 1 } else { metrics.streamsReset += 1 }
        }
        lastActivity = loop.now
        if let goAway = stream.goAwayAfter { submitGoAway(goAway) }
        return 0
    }

    /// The request is complete: hand it to the application.
    private func dispatch(_ stream: StreamState) {
        stream.requestComplete = true
        guard !stream.rejected, !stream.responded else { return }
        let control = StreamControl()
        stream.control = control
        let request = HTTP2Request(
            method: stream.method ?? "", path: stream.path ?? "", authority: stream.authority, scheme: stream.scheme,
            headers: stream.headers, body: stream.body, connectionID: id, streamID: Int(stream.id),
            remoteAddress: remoteAddress, control: control)
        stream.headers = []
        stream.body = Data()
        switch loop.handler {
        case .inline(let handler):
            var response = handler(request)
            guard response.delay > .zero else {
                submitResponse(stream, response, now: loop.now)
                return
            }
            let (loop, connectionID, streamID, delay) = (self.loop, id, stream.id, response.delay)
            response.delay = .zero
            stream.task = Task { [response] in
                try? await Task.sleep(for: delay)
                loop.post(.respond(connectionID: connectionID, streamID: streamID, response: response))
            }
        case .async(let handler):
            let loop = self.loop
            let connectionID = id
            let streamID = stream.id
            stream.task = Task {
                let response: HTTP2Response
                do {
                    response = try await handler(request)
                } catch {
                    response = HTTP2Response(status: 500)
                }
                loop.post(.respond(connectionID: connectionID, streamID: streamID, response: response))
            }
        }
    }
}
