import ConnectionLoop
import HTTP2Support

/// Checks a request before it becomes HTTP/2 frames: nghttp2 sends what it is given, so the client refuses
/// fields a server would reject as malformed (RFC 9113 §8.2) instead of breaking the stream on the wire.
enum RequestValidation {
    /// Fields a request may not carry: the connection-specific ones, and `host`, which `:authority` replaces.
    static let refusedHeaders = connectionSpecificHeaders.union(["host"])

    /// What is wrong with `request`, or `nil`. The text names the field, never its value.
    static func problem(in request: HTTP2Client.Request) -> String? {
        guard isToken(request.method) else {
            return "method is not an HTTP token"
        }
        guard isPath(request.path) else {
            return "path must start with / and hold only visible ASCII"
        }
        for header in request.headers {
            guard isToken(header.name) else {
                return "header name is not an HTTP token"
            }
            let name = wireName(header.name)
            guard !refusedHeaders.contains(name) else {
                return "header \(name) is connection-specific and not allowed in HTTP/2"
            }
            guard isFieldValue(header.value) else {
                return "value of header \(name) contains a control character"
            }
        }
        return nil
    }

    /// `name` as HTTP/2 sends it: in lowercase (copied only when it has an uppercase letter).
    static func wireName(_ name: String) -> String {
        name.utf8.contains { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") } ? name.lowercased() : name
    }

    /// A non-empty HTTP token (RFC 9110 §5.6.2).
    private static func isToken(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            guard !bytes.isEmpty else { return false }
            for byte in bytes where !isTokenByte(byte) { return false }
            return true
        }
    }

    /// Starts with `/` and holds only visible ASCII.
    private static func isPath(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            guard bytes.first == UInt8(ascii: "/") else { return false }
            for byte in bytes where byte <= 0x20 || byte >= 0x7F { return false }
            return true
        }
    }

    /// Holds no NUL, CR or LF.
    private static func isFieldValue(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            for byte in bytes where byte == 0 || byte == 0x0A || byte == 0x0D { return false }
            return true
        }
    }

    @inline(__always)
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        tokenBytes[Int(byte)]
    }

    /// `tchar` of RFC 9110: letters, digits and ``!#$%&'*+-.^_`|~``.
    private static let tokenBytes: [Bool] = (0..<256).map { value in
        let byte = UInt8(value)
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
