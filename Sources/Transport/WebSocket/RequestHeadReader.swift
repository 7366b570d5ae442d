import CHTTPParser
import HTTPTypes

/// The head of an HTTP/1.1 request: what a WebSocket opening handshake is.
package struct RequestHead: Sendable, Equatable {
    /// The method (`GET`).
    package var method: String
    /// The request target as sent (`/jmap/ws?ticket=…`).
    package var target: String
    /// The header fields in order, names as sent.
    package var headers: [HTTPField]

    /// The target's path.
    package var path: String { String(target.prefix { $0 != "?" && $0 != "#" }) }

    /// The target's query string (without `?`), empty when there is none.
    package var query: String {
        guard let mark = target.firstIndex(of: "?") else { return "" }
        return String(target[target.index(after: mark)...].prefix { $0 != "#" })
    }

    /// The first value of header `name` (case-insensitive).
    package func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }
}

/// Reads a request head with http-parser, as bytes arrive: its strict framing, without a body (a handshake has
/// none). One connection's, on one thread.
package final class RequestHeadReader {
    /// What the bytes fed so far make.
    package enum Outcome: Equatable {
        /// More bytes are needed.
        case incomplete
        /// The head, and the bytes that came after it (a client's first frames).
        case complete(RequestHead, rest: [UInt8])
        /// Not an HTTP/1.1 request head (the reason, for the 400).
        case invalid(String)
        /// Longer than the limit.
        case tooLarge
    }

    private var parser = http_parser()
    private var settings = http_parser_settings()
    private let limit: Int
    private var consumed = 0
    fileprivate var target: [UInt8] = []
    fileprivate var fields: [(name: [UInt8], value: [UInt8])] = []
    fileprivate var inValue = false
    fileprivate var headComplete = false

    /// A reader of heads up to `limit` bytes.
    package init(limit: Int = 8192) {
        self.limit = limit
        http_parser_init(&parser, HTTP_REQUEST)
        settings.on_url = requestTarget
        settings.on_header_field = headerName
        settings.on_header_value = headerValue
        settings.on_headers_complete = headEnded
    }

    /// Feeds bytes; the outcome so far.
    package func feed(_ bytes: UnsafeRawBufferPointer) -> Outcome {
        guard !headComplete else { return .invalid("The head was already read.") }
        let context = Unmanaged.passUnretained(self).toOpaque()
        parser.data = context
        let parsed = bytes.withMemoryRebound(to: CChar.self) { chars in
            http_parser_execute(&parser, &settings, chars.baseAddress, chars.count)
        }
        if headComplete {
            guard consumed + parsed <= limit else { return .tooLarge }
            let rest = Array(bytes[min(bytes.count, parsed)...])
            let head = RequestHead(
                method: String(cString: http_method_str(http_method(sfhp_method(&parser)))),
                target: String(decoding: target, as: UTF8.self),
                headers: fields.map {
                    HTTPField(
                        name: String(decoding: $0.name, as: UTF8.self), value: String(decoding: $0.value, as: UTF8.self)
                    )
                })
            return .complete(head, rest: rest)
        }
        consumed += bytes.count
        let error = http_errno(sfhp_errno(&parser))
        if error != HPE_OK {
            return .invalid("The request head is malformed (\(String(cString: http_errno_description(error)))).")
        }
        return consumed > limit ? .tooLarge : .incomplete
    }
}

private func reader(_ parser: UnsafeMutablePointer<http_parser>?) -> RequestHeadReader? {
    guard let data = parser?.pointee.data else { return nil }
    return Unmanaged<RequestHeadReader>.fromOpaque(data).takeUnretainedValue()
}

private func bytes(_ at: UnsafePointer<CChar>?, _ length: Int) -> UnsafeRawBufferPointer {
    UnsafeRawBufferPointer(start: at, count: at == nil ? 0 : length)
}

private let requestTarget: http_data_cb = { parser, at, length in
    reader(parser)?.target.append(contentsOf: bytes(at, length))
    return 0
}

private let headerName: http_data_cb = { parser, at, length in
    guard let reader = reader(parser) else { return 1 }
    if reader.inValue || reader.fields.isEmpty {
        reader.fields.append(([], []))
        reader.inValue = false
    }
    reader.fields[reader.fields.count - 1].name.append(contentsOf: bytes(at, length))
    return 0
}

private let headerValue: http_data_cb = { parser, at, length in
    guard let reader = reader(parser), !reader.fields.isEmpty else { return 1 }
    reader.inValue = true
    reader.fields[reader.fields.count - 1].value.append(contentsOf: bytes(at, length))
    return 0
}

/// The head is complete: 2 tells http-parser to expect no body and stop here (an upgrade's frames follow).
private let headEnded: http_cb = { parser in
    reader(parser)?.headComplete = true
    return 2
}
