import Foundation

/// Header fields whose meaning two HTTP parsers could read differently (a proxy in front, and this server), and so
/// smuggle one request inside another: refused with 400 before the body is read, on a connection then closed.
/// libmicrohttpd itself refuses a request without `Host` (in its strict mode), duplicate or conflicting
/// `Content-Length`, and `Content-Length` with `Transfer-Encoding`.
enum RequestFraming {
    /// Why `headers` cannot be framed safely, or `nil` when they can.
    static func problem(_ headers: HTTPHeaders) -> String? {
        var hosts = 0
        for field in headers {
            let (name, value) = (field.name, field.value)
            guard !name.isEmpty, name.utf8.allSatisfy(isTokenCharacter) else {
                return "A header field name holds a character a token cannot (RFC 9110 section 5.1)."
            }
            switch name.lowercased() {
            case "transfer-encoding":
                // Only `chunked` is implemented; any other coding leaves the body's end unknown.
                guard value.trimmingCharacters(in: [" ", "\t"]).lowercased() == "chunked" else {
                    return "Transfer-Encoding other than chunked is not supported."
                }
            case "host":
                hosts += 1
            default:
                continue
            }
        }
        return hosts > 1 ? "More than one Host header field." : nil
    }

    /// RFC 9110's `tchar`.
    private static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
