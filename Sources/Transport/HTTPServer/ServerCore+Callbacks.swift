import CMicroHTTPD
import Foundation

// The C entry points libmicrohttpd calls. They are capture-less; the server core arrives as the
// unretained `cls` context and the per-request `RequestContext` through `con_cls`.

/// `MHD_OPTION_URI_LOG_CALLBACK`: the first look at a request; its return value becomes `con_cls`.
let mhdURILog:
    @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, OpaquePointer?) -> UnsafeMutableRawPointer? = {
        _, uri, _ in
        let context = RequestContext(rawURI: uri.map { String(cString: $0) } ?? "/")
        return Unmanaged.passRetained(context).toOpaque()
    }

/// `MHD_OPTION_NOTIFY_COMPLETED`: the request is over (answered, aborted or timed out).
let mhdRequestCompleted:
    @convention(c) (
        UnsafeMutableRawPointer?, OpaquePointer?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
        MHD_RequestTerminationCode
    ) -> Void = { cls, _, conCls, _ in
        guard let cls, let conCls, let raw = conCls.pointee else { return }
        conCls.pointee = nil
        let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
        let context = Unmanaged<RequestContext>.fromOpaque(raw).takeRetainedValue()
        core.requestCompleted(context)
    }

/// The accept policy: once the server drains, a new connection is closed as soon as it is accepted.
let mhdAcceptPolicy: MHD_AcceptPolicyCallback = { cls, _, _ in
    guard let cls else { return MHD_Result.NO }
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
    return core.isDraining ? MHD_Result.NO : MHD_Result.YES
}

/// The `sfmhd_logger` callback: one formatted library diagnostic.
let mhdLogMessage: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?) -> Void = { cls, message in
    guard let cls, let message else { return }
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
    if let text = libraryMessage(String(cString: message)) { core.logError(text) }
}

/// Prepares a libmicrohttpd diagnostic for the error log: drops the routine reports of clients that
/// went away (normal for event streams) and removes quoted request targets, which may carry tokens.
func libraryMessage(_ raw: String) -> String? {
    let text = raw.trimmingCharacters(in: .whitespacesAndNewlines)
    let routine = ["no longer available for sending", "Connection reset", "Broken pipe", "closed by remote side"]
    if text.isEmpty || routine.contains(where: { text.contains($0) }) { return nil }
    guard let open = text.firstIndex(of: "`"), let close = text[open...].firstIndex(of: "'") else { return text }
    return libraryMessage(String(text[..<open]) + "(request)" + String(text[text.index(after: close)...]))
}

/// The access handler: called after the headers, for each body chunk, after the body, and again
/// after a suspended connection is resumed.
let mhdAccess: MHD_AccessHandlerCallback = {
    cls, connection, _, method, _, uploadData, uploadDataSize, conCls in
    guard let cls, let connection, let conCls else { return MHD_Result.NO }
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
    let context: RequestContext
    if let raw = conCls.pointee {
        context = Unmanaged<RequestContext>.fromOpaque(raw).takeUnretainedValue()
    } else {
        context = RequestContext(rawURI: "/")
        conCls.pointee = Unmanaged.passRetained(context).toOpaque()
    }
    let chunk: UnsafeRawBufferPointer? =
        if let uploadData, let uploadDataSize, uploadDataSize.pointee > 0 {
            UnsafeRawBufferPointer(start: uploadData, count: uploadDataSize.pointee)
        } else { nil }
    let result = core.access(
        context, connection: connection, method: method.map { String(cString: $0) } ?? "GET", chunk: chunk)
    if chunk != nil { uploadDataSize?.pointee = 0 }
    return result ? MHD_Result.YES : MHD_Result.NO
}

/// Content reader of event-stream responses.
let mhdEventStreamReader: @convention(c) (UnsafeMutableRawPointer?, UInt64, UnsafeMutablePointer<CChar>?, Int) -> Int =
    {
        cls, _, buffer, capacity in
        guard let cls, let buffer else { return -2 }
        let binding = Unmanaged<EventStreamBinding>.fromOpaque(cls).takeUnretainedValue()
        return binding.stream.read(into: buffer, capacity: capacity)
    }

/// Release callback of event-stream responses: the client is gone or the stream ended.
let mhdEventStreamFree: @convention(c) (UnsafeMutableRawPointer?) -> Void = { cls in
    guard let cls else { return }
    let binding = Unmanaged<EventStreamBinding>.fromOpaque(cls).takeRetainedValue()
    binding.core.unregister(binding.stream)
    binding.stream.terminate()
}

/// What an event-stream response's callbacks need.
final class EventStreamBinding: Sendable {
    let stream: EventStream
    let core: ServerCore

    init(stream: EventStream, core: ServerCore) {
        self.stream = stream
        self.core = core
    }
}

extension ServerCore {
    /// One access-handler call. Returns `false` to make libmicrohttpd drop the connection.
    func access(
        _ context: RequestContext, connection: OpaquePointer, method: String, chunk: UnsafeRawBufferPointer?
    ) -> Bool {
        let maxBody = configuration.maxBodySize
        enum Step {
            case accept
            case drop
            case reject(HTTPError, closing: Bool)
            case dispatch(Data)
            case queue(HTTPResponse?)
        }
        let step = context.state.withLock { state -> Step in
            switch state.phase {
            case .new:
                state.phase = .receiving
                state.method = method
                state.connection = MHDConnection(pointer: connection)
                state.remoteAddress = Self.remoteAddress(of: connection)
                if isDraining {
                    return .reject(Self.shuttingDown, closing: true)
                }
                if let problem = RequestFraming.problem(Self.headers(of: connection)) {
                    return .reject(HTTPError(.badRequest, code: "malformedRequest", message: problem), closing: true)
                }
                if let length = Self.headerValue(connection, "Content-Length").flatMap({ UInt64($0) }),
                    length > UInt64(maxBody)
                {
                    return .reject(Self.payloadTooLarge(maxBody), closing: true)
                }
                return .accept
            case .receiving:
                if let chunk {
                    state.received += chunk.count
                    if state.bodyTooLarge {
                        // A chunked body past the limit is read and dropped so the 413 can follow it;
                        // past a generous bound the connection is simply closed.
                        return state.received > Self.discardLimit(maxBody) ? .drop : .accept
                    }
                    if state.body.count + chunk.count > maxBody {
                        state.bodyTooLarge = true
                        state.body = Data()
                    } else {
                        state.body.append(contentsOf: chunk)
                    }
                    return .accept
                }
                if state.bodyTooLarge { return .reject(Self.payloadTooLarge(maxBody), closing: false) }
                state.phase = .dispatched
                let body = state.body
                state.body = Data()
                return .dispatch(body)
            case .dispatched:
                let response = state.response
                state.response = nil
                return .queue(response)
            case .responded:
                return .accept
            }
        }
        switch step {
        case .accept:
            return true
        case .drop:
            return false
        case .reject(let error, let closing):
            var response = error.response
            if closing { response.headers["Connection"] = "close" }
            return queue(response, context: context, connection: connection)
        case .queue(let response):
            return queue(response ?? HTTPError.internalError.response, context: context, connection: connection)
        case .dispatch(let body):
            let request = HTTPRequest(
                method: HTTPMethod(rawValue: method), path: context.path, queryString: context.query,
                headers: Self.headers(of: connection), body: body,
                remoteAddress: context.state.withLock { $0.remoteAddress })
            // Suspend before anyone can learn about the request: every resume must follow its suspend.
            MHD_suspend_connection(connection)
            if beginHandler(context) {
                run(request, for: context)
            } else {
                var response = Self.shuttingDown.response
                response.headers["Connection"] = "close"
                context.complete(with: response)
            }
            return true
        }
    }

    /// Builds the libmicrohttpd response and queues it.
    private func queue(_ response: HTTPResponse, context: RequestContext, connection: OpaquePointer) -> Bool {
        context.state.withLock { state in
            state.phase = .responded
            state.status = response.status.rawValue
        }
        let mhdResponse: OpaquePointer?
        if let stream = response.eventStream {
            let binding = Unmanaged.passRetained(EventStreamBinding(stream: stream, core: self)).toOpaque()
            // The block is allocated with the response and kept while the stream is held; events are small, and a
            // larger one is simply read in several calls.
            mhdResponse = MHD_create_response_from_callback(
                UInt64.max, 1024, mhdEventStreamReader, binding, mhdEventStreamFree)
            if mhdResponse == nil {
                Unmanaged<EventStreamBinding>.fromOpaque(binding).release()
                stream.terminate()
            } else {
                stream.attach(connection: MHDConnection(pointer: connection))
                register(stream)
            }
        } else {
            mhdResponse = response.body.withUnsafeBytes { bytes in
                MHD_create_response_from_buffer(
                    bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
            }
        }
        guard let mhdResponse else {
            logError("could not create a response")
            return false
        }
        defer { MHD_destroy_response(mhdResponse) }
        for field in response.headers {
            let name = field.name.lowercased()
            if name == "content-length" || name == "transfer-encoding" { continue }
            if field.name.contains(where: { $0 == "\r" || $0 == "\n" || $0 == ":" })
                || field.value.contains(where: { $0 == "\r" || $0 == "\n" })
            {
                logError("dropped a response header with an invalid name or value")
                continue
            }
            _ = MHD_add_response_header(mhdResponse, field.name, field.value)
        }
        return MHD_queue_response(connection, UInt32(response.status.rawValue), mhdResponse) == MHD_Result.YES
    }

    /// The request-completed callback's work: unregister, drop undelivered streams, log.
    func requestCompleted(_ context: RequestContext) {
        let leftover = context.state.withLock { state -> HTTPResponse? in
            defer { state.response = nil }
            return state.response
        }
        leftover?.eventStream?.terminate()
        let (method, status, remote) = context.finish()
        endRequest(context)
        // An empty method means the application never saw the request (the library refused it).
        if let accessLog = configuration.accessLog, !method.isEmpty {
            accessLog(
                HTTPServer.AccessLogEntry(
                    method: method, path: context.path, status: status,
                    duration: ContinuousClock.now - context.started, remoteAddress: remote))
        }
    }

    static let shuttingDown = HTTPError(
        .serviceUnavailable, code: "shuttingDown", message: "The server is shutting down.")

    static func payloadTooLarge(_ limit: Int) -> HTTPError {
        HTTPError(
            .payloadTooLarge, code: "payloadTooLarge", message: "The request body exceeds the limit of \(limit) bytes.")
    }

    static func discardLimit(_ maxBody: Int) -> Int { maxBody + max(maxBody * 4, 4 << 20) }

    static func headerValue(_ connection: OpaquePointer, _ name: String) -> String? {
        MHD_lookup_connection_value(connection, .HEADER_KIND, name).map { String(cString: $0) }
    }

    static func headers(of connection: OpaquePointer) -> HTTPHeaders {
        var headers = HTTPHeaders()
        withUnsafeMutablePointer(to: &headers) { pointer in
            _ = MHD_get_connection_values(
                connection, .HEADER_KIND,
                { cls, _, key, value in
                    guard let cls, let key else { return MHD_Result.YES }
                    cls.assumingMemoryBound(to: HTTPHeaders.self).pointee.add(
                        name: String(cString: key), value: value.map { String(cString: $0) } ?? "")
                    return MHD_Result.YES
                }, pointer)
        }
        return headers
    }

    static func remoteAddress(of connection: OpaquePointer) -> String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer -> String in
            guard sfmhd_connection_client_address(connection, buffer.baseAddress, buffer.count) == 0 else { return "" }
            return String(cString: buffer.baseAddress!)
        }
    }
}
