/// Checks a request before it becomes HTTP/2 frames: nghttp2 sends what it is given, so the client refuses
/// fields a server would reject as malformed (RFC 9113 §8.2) instead of breaking the stream on the wire.
enum RequestValidation {
    /// Header fields that belong to HTTP/1.1 connections and must not appear in HTTP/2.
    static let connectionSpecific: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host",
    ]

    /// What is wrong with `request`, or `nil`. The text names the field, never its value.
    static func problem(in request: HTTP2Client.Request) -> String? {
        guard !request.method.isEmpty, all(request.method, isTokenByte) else {
            return "method is not an HTTP token"
        }
        guard request.path.utf8.first == UInt8(ascii: "/"), all(request.path, { $0 > 0x20 && $0 < 0x7F }) else {
            return "path must start with / and hold only visible ASCII"
        }
        for header in request.headers {
            guard !header.name.isEmpty, all(header.name, isTokenByte) else {
                return "header name is not an HTTP token"
            }
            guard !connectionSpecific.contains(header.name.lowercased()) else {
                return "header \(header.name.lowercased()) is connection-specific and not allowed in HTTP/2"
            }
            guard all(header.value, { $0 != 0 && $0 != 0x0A && $0 != 0x0D }) else {
                return "value of header \(header.name.lowercased()) contains a control character"
            }
        }
        return nil
    }

    /// Whether every UTF-8 byte of `text` passes `test` (over contiguous storage, without per-byte iteration
    /// overhead).
    private static func all(_ text: String, _ test: (UInt8) -> Bool) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            for byte in bytes where !test(byte) { return false }
            return true
        }
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
