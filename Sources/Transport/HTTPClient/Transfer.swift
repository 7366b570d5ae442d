import CCurl
import Durations
import Foundation
import Locking

/// One request on its way through libcurl: owns the easy handle, its header list and error buffer.
///
/// Thread rules: before submission only the submitting task touches the mutable fields; after
/// submission only the I/O thread of ``CurlEventLoop`` does (the hand-over goes through the loop's
/// inbox mutex). `phase` is the one field shared across threads and it is guarded by its own `LockedValue`.
final class Transfer: @unchecked Sendable {
    /// Where the result goes.
    enum Delivery {
        case buffered(CheckedContinuation<HTTPClient.Response, any Error>)
        case streaming(CheckedContinuation<HTTPClient.StreamingResponse, any Error>, CurlEventLoop)
    }

    /// How far the submitting side got; decides what a cancellation has to do.
    enum Phase {
        case created
        case submitted
        case cancelledBeforeSubmission
    }

    /// The easy handle (`CURL *`).
    let easy: UnsafeMutableRawPointer
    let phase = LockedValue(Phase.created)
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var connectToList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private let isStreaming: Bool
    private let maximumBodySize: Int
    /// `scheme://host:port` when this is a cleartext prior-knowledge HTTP/2 request (see ``PriorKnowledgePool``).
    let priorKnowledgeOrigin: String?

    // Owned by the I/O thread once submitted.
    var delivery: Delivery?
    /// How many times the transfer was handed to libcurl.
    var attempts = 0
    private var bodyContinuation: AsyncThrowingStream<Data, any Error>.Continuation?
    private var status = 0
    private var version = HTTPVersion.unknown
    private var headers = HTTPHeaders()
    private var headComplete = false
    private var body = Data()
    private var abortError: HTTPClientError?

    /// Creates and configures the easy handle for `request`.
    init(request: HTTPClient.Request, configuration: HTTPClient.Configuration, streaming: Bool) throws {
        guard let easy = curl_easy_init() else {
            throw HTTPClientError.curl(code: Int(CURLE_OUT_OF_MEMORY.rawValue), message: "curl_easy_init failed")
        }
        self.easy = easy
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        isStreaming = streaming
        maximumBodySize = configuration.maximumResponseBodySize
        priorKnowledgeOrigin =
            configuration.httpVersion == .http2PriorKnowledge ? Self.cleartextOrigin(of: request.url) : nil
        try configure(request: request, configuration: configuration)
    }

    deinit {
        curl_easy_cleanup(easy)
        if let headerList { curl_slist_free_all(headerList) }
        if let connectToList { curl_slist_free_all(connectToList) }
        errorBuffer.deallocate()
    }

    // MARK: - Configuration

    private func configure(request: HTTPClient.Request, configuration: HTTPClient.Configuration) throws {
        try set(CURLOPT_NOSIGNAL, 1)
        try set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(errorBuffer))
        try set(CURLOPT_URL, string: request.url)
        try set(CURLOPT_PROTOCOLS_STR, string: "http,https")
        try set(CURLOPT_PROXY, string: configuration.proxy ?? "")
        for entry in configuration.connectTo {
            guard let appended = curl_slist_append(connectToList, entry) else {
                throw HTTPClientError.curl(code: Int(CURLE_OUT_OF_MEMORY.rawValue), message: "curl_slist_append failed")
            }
            connectToList = appended
        }
        if let connectToList { try check(sfcurl_easy_setopt_slist(easy, CURLOPT_CONNECT_TO, connectToList)) }
        try set(CURLOPT_TCP_KEEPALIVE, 1)
        try set(CURLOPT_MAXAGE_CONN, max(1, Int(configuration.maximumIdleConnectionAge.components.seconds)))

        switch configuration.httpVersion {
        case .http1:
            try set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1))
        case .http2:
            try set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
            try set(CURLOPT_PIPEWAIT, 1)
        case .http2PriorKnowledge:
            try set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE))
            try set(CURLOPT_PIPEWAIT, 1)
        }

        try set(CURLOPT_CONNECTTIMEOUT_MS, Self.milliseconds(configuration.connectTimeout))
        let total = request.timeout ?? (isStreaming ? nil : configuration.requestTimeout)
        if let total { try set(CURLOPT_TIMEOUT_MS, Self.milliseconds(total)) }

        let tls = configuration.tls
        if let caFile = tls.caFile {
            try set(CURLOPT_CAINFO, string: caFile)
            try set(CURLOPT_CAPATH, string: nil)
        }
        if let certificate = tls.clientCertificateFile {
            try set(CURLOPT_SSLCERT, string: certificate)
            try set(CURLOPT_SSLCERTTYPE, string: "PEM")
            if let key = tls.clientKeyFile {
                try set(CURLOPT_SSLKEY, string: key)
                try set(CURLOPT_SSLKEYTYPE, string: "PEM")
            }
        }
        if let pins = tls.curlPinnedPublicKey { try set(CURLOPT_PINNEDPUBLICKEY, string: pins) }

        try configureMethodAndBody(request)
        try configureHeaders(request, userAgent: configuration.userAgent)

        let context = Unmanaged.passUnretained(self).toOpaque()
        try check(
            sfcurl_easy_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION) { pointer, size, count, context in
                let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
                return transfer.receiveBody(UnsafeRawBufferPointer(start: pointer, count: size * count))
            })
        try set(CURLOPT_WRITEDATA, pointer: context)
        try check(
            sfcurl_easy_setopt_data_callback(easy, CURLOPT_HEADERFUNCTION) { pointer, size, count, context in
                let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
                return transfer.receiveHeaderLine(UnsafeRawBufferPointer(start: pointer, count: size * count))
            })
        try set(CURLOPT_HEADERDATA, pointer: context)
    }

    private static func cleartextOrigin(of url: String) -> String? {
        guard let components = URLComponents(string: url), components.scheme?.lowercased() == "http",
            let host = components.host?.lowercased()
        else { return nil }
        return "http://\(host):\(components.port ?? 80)"
    }

    /// Asks for HTTP/2 with prior knowledge (a new connection) or plain HTTP/2 (reusing an existing h2c connection).
    func usePriorKnowledge(_ priorKnowledge: Bool) {
        let version = priorKnowledge ? CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE : CURL_HTTP_VERSION_2_0
        _ = sfcurl_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(version))
    }

    /// Whether a response head arrived over HTTP/2 (so the connection it used speaks HTTP/2).
    var receivedHTTP2Response: Bool { version == .http2 }

    /// Whether the transfer can be sent again from scratch: nothing reached the caller yet.
    var canRetry: Bool {
        switch delivery {
        case .buffered: true
        case .streaming: bodyContinuation == nil
        case nil: false
        }
    }

    /// Clears what a failed attempt received, before the transfer is added again.
    func resetForRetry() {
        status = 0
        version = .unknown
        headers = HTTPHeaders()
        headComplete = false
        body = Data()
        abortError = nil
        errorBuffer[0] = 0
    }

    private func configureMethodAndBody(_ request: HTTPClient.Request) throws {
        guard !request.method.rawValue.isEmpty,
            request.method.rawValue.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { throw HTTPClientError.invalidRequest("method is not a valid token") }
        switch (request.method, request.body) {
        case (.head, nil):
            try set(CURLOPT_NOBODY, 1)
        case (.get, nil):
            try set(CURLOPT_HTTPGET, 1)
        case (.post, nil):
            try setBody(Data())
        case (let method, nil):
            try set(CURLOPT_CUSTOMREQUEST, string: method.rawValue)
        case (let method, let body?):
            try setBody(body)
            if method != .post { try set(CURLOPT_CUSTOMREQUEST, string: method.rawValue) }
        }
    }

    private func setBody(_ body: Data) throws {
        try check(sfcurl_easy_setopt_int64(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)))
        // COPYPOSTFIELDS copies the bytes, so the Data need not outlive this call.
        try body.withUnsafeBytes { raw in
            if let base = raw.baseAddress, !raw.isEmpty {
                try set(CURLOPT_COPYPOSTFIELDS, pointer: UnsafeMutableRawPointer(mutating: base))
            } else {
                try set(CURLOPT_COPYPOSTFIELDS, string: "")
            }
        }
    }

    private func configureHeaders(_ request: HTTPClient.Request, userAgent: String?) throws {
        var lines: [String] = []
        for field in request.headers {
            let name = field.name
            let value = field.value
            guard !name.isEmpty, name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") }) else {
                throw HTTPClientError.invalidRequest("a header name is empty or not a valid token")
            }
            guard !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
                throw HTTPClientError.invalidRequest("the value of header '\(name)' contains a line break")
            }
            lines.append(value.isEmpty ? "\(name);" : "\(name): \(value)")
        }
        // libcurl would otherwise add `Expect: 100-continue` to larger bodies (an extra round trip) and a
        // form-encoded content type to any body; send neither unless the caller asked for them.
        if !request.headers.contains("Expect") { lines.append("Expect:") }
        if request.body != nil || request.method == .post, !request.headers.contains("Content-Type") {
            lines.append("Content-Type:")
        }
        if let userAgent, !request.headers.contains("User-Agent") {
            try set(CURLOPT_USERAGENT, string: userAgent)
        }
        for line in lines {
            guard let appended = curl_slist_append(headerList, line) else {
                throw HTTPClientError.curl(code: Int(CURLE_OUT_OF_MEMORY.rawValue), message: "curl_slist_append failed")
            }
            headerList = appended
        }
        if let headerList { try check(sfcurl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList)) }
    }

    private func set(_ option: CURLoption, _ value: Int) throws {
        try check(sfcurl_easy_setopt_long(easy, option, value))
    }

    private func set(_ option: CURLoption, string: String?) throws {
        if let string {
            try check(sfcurl_easy_setopt_string(easy, option, string))  // libcurl copies strings
        } else {
            try check(sfcurl_easy_setopt_string(easy, option, nil))
        }
    }

    private func set(_ option: CURLoption, pointer: UnsafeMutableRawPointer?) throws {
        try check(sfcurl_easy_setopt_pointer(easy, option, pointer))
    }

    private func check(_ code: CURLcode) throws {
        guard code == CURLE_OK else {
            throw HTTPClientError.invalidRequest(String(cString: curl_easy_strerror(code)))
        }
    }

    static func milliseconds(_ duration: Duration) -> Int {
        Int(max(1, min(duration.wholeMilliseconds, Int64(Int32.max))))
    }

    // MARK: - Callbacks (I/O thread)

    private func receiveHeaderLine(_ bytes: UnsafeRawBufferPointer) -> Int {
        var end = bytes.count
        while end > 0, bytes[end - 1] == 0x0D || bytes[end - 1] == 0x0A { end -= 1 }
        if end >= 5, bytes[0..<5].elementsEqual("HTTP/".utf8) {
            let line = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[0..<end]), as: UTF8.self)
            // A new status line starts a new header block (after a 1xx interim response, for example).
            let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
            status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
            version = Self.version(fromStatusLine: parts.first ?? "")
            headers = HTTPHeaders()
            headComplete = false
        } else if end == 0 {
            if status >= 200 && !headComplete {
                headComplete = true
                if isStreaming { deliverStreamingHead() }
            }
        } else if !headComplete, let (name, value) = Self.headerField(bytes) {
            headers.add(name: name, value: value)
        }
        return bytes.count
    }

    /// Splits a `name: value` header line at its first colon, trimming spaces and tabs (and the line end) from
    /// both parts; `nil` when there is no colon.
    static func headerField(_ bytes: UnsafeRawBufferPointer) -> (name: String, value: String)? {
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        func trimmed(_ range: Range<Int>) -> String {
            var lower = range.lowerBound
            var upper = range.upperBound
            let blank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D || $0 == 0x0A }
            while lower < upper, blank(bytes[lower]) { lower += 1 }
            while upper > lower, blank(bytes[upper - 1]) { upper -= 1 }
            return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[lower..<upper]), as: UTF8.self)
        }
        return (trimmed(0..<colon), trimmed((colon + 1)..<bytes.count))
    }

    private func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        if isStreaming {
            if !headComplete {
                headComplete = true
                deliverStreamingHead()
            }
            guard let bodyContinuation, !bytes.isEmpty else { return bytes.count }
            if case .terminated = bodyContinuation.yield(Data(bytes)) {
                abortError = .cancelled
                return 0
            }
            return bytes.count
        }
        guard body.count + bytes.count <= maximumBodySize else {
            abortError = .responseTooLarge(limit: maximumBodySize)
            return 0
        }
        body.append(contentsOf: bytes)
        return bytes.count
    }

    private func deliverStreamingHead() {
        guard case .streaming(let continuation, let loop) = delivery else { return }
        delivery = nil
        let (stream, bodyContinuation) = AsyncThrowingStream.makeStream(of: Data.self, throwing: (any Error).self)
        bodyContinuation.onTermination = { [weak self, weak loop] termination in
            if case .cancelled = termination, let self { loop?.cancel(self) }
        }
        self.bodyContinuation = bodyContinuation
        if version == .unknown { version = currentVersion() }
        let body = HTTPBodyStream(base: stream, handle: TransferHandle(loop: loop, transfer: self))
        continuation.resume(
            returning: HTTPClient.StreamingResponse(status: status, headers: headers, version: version, body: body))
    }

    // MARK: - Completion (I/O thread)

    /// The number of new connections this transfer opened.
    func connectionsOpened() -> Int {
        var count = 0
        _ = sfcurl_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &count)
        return count
    }

    /// Finishes the transfer with libcurl's result code.
    func complete(with code: CURLcode) {
        guard code == CURLE_OK else {
            fail(abortError ?? Self.error(for: code, message: String(cString: errorBuffer)))
            return
        }
        var responseCode = 0
        _ = sfcurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &responseCode)
        if status == 0 { status = responseCode }
        if version == .unknown { version = currentVersion() }
        switch delivery {
        case .buffered(let continuation):
            delivery = nil
            let response = HTTPClient.Response(status: status, headers: headers, body: body, version: version)
            body = Data()
            continuation.resume(returning: response)
        case .streaming:
            headComplete = true
            deliverStreamingHead()
            finishBody(throwing: nil)
        case nil:
            finishBody(throwing: nil)
        }
    }

    /// Fails the transfer: the caller waiting for the response, or the body stream, gets `error`.
    func fail(_ error: any Error) {
        switch delivery {
        case .buffered(let continuation):
            delivery = nil
            continuation.resume(throwing: error)
        case .streaming(let continuation, _):
            delivery = nil
            continuation.resume(throwing: error)
        case nil:
            finishBody(throwing: error)
        }
    }

    private func finishBody(throwing error: (any Error)?) {
        guard let bodyContinuation else { return }
        self.bodyContinuation = nil
        bodyContinuation.finish(throwing: error)
    }

    private func currentVersion() -> HTTPVersion {
        var value = 0
        _ = sfcurl_easy_getinfo_long(easy, CURLINFO_HTTP_VERSION, &value)
        switch value {
        case Int(CURL_HTTP_VERSION_1_0): return .http1_0
        case Int(CURL_HTTP_VERSION_1_1): return .http1_1
        case Int(CURL_HTTP_VERSION_2_0): return .http2
        case Int(CURL_HTTP_VERSION_3): return .http3
        default: return .unknown
        }
    }

    private static func version(fromStatusLine token: Substring) -> HTTPVersion {
        switch token {
        case "HTTP/1.0": .http1_0
        case "HTTP/1.1": .http1_1
        case "HTTP/2", "HTTP/2.0": .http2
        case "HTTP/3": .http3
        default: .unknown
        }
    }

    /// Maps a libcurl result code to the error callers see.
    static func error(for code: CURLcode, message: String) -> HTTPClientError {
        let text = message.isEmpty ? String(cString: curl_easy_strerror(code)) : message
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            return .timeout
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT:
            return .connectionFailed(text)
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            return .pinMismatch
        case CURLE_PEER_FAILED_VERIFICATION:
            return .untrustedCertificate(text)
        case CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE,
            CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED,
            CURLE_SSL_CRL_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CLIENTCERT,
            CURLE_USE_SSL_FAILED:
            return .tlsFailure(text)
        case CURLE_GOT_NOTHING, CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_HTTP2, CURLE_HTTP2_STREAM,
            CURLE_PARTIAL_FILE, CURLE_WEIRD_SERVER_REPLY:
            return .connectionLost(text)
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
            return .invalidRequest(text)
        default:
            return .curl(code: Int(code.rawValue), message: text)
        }
    }
}
