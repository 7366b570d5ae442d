import Foundation

/// Header fields whose meaning two HTTP parsers could read differently (a proxy in front, and this server), and so
/// smuggle one request inside another: refused with 400 before the body is read and before any handler, on a
/// connection then closed (RFC 9112 section 6.3).
///
/// libmicrohttpd frames a body by the first `Content-Length` it reads and accepts a second one, so a later field
/// could hide a request inside the body; the check here does not rely on the library for any of these cases.
enum RequestFraming {
    /// Why `headers` cannot be framed safely, or `nil` when they can.
    static func problem(_ headers: HTTPHeaders) -> String? {
        var hosts = 0
        var lengths = 0
        var encodings = 0
        for field in headers {
            let (name, value) = (field.name, field.value)
            guard !name.isEmpty, name.utf8.allSatisfy(isTokenCharacter) else {
                return "A header field name holds a character a token cannot (RFC 9110 section 5.1)."
            }
            switch name.lowercased() {
            case "content-length":
                lengths += 1
                // One decimal number: a list, even of equal values, is refused rather than folded.
                let digits = value.trimmingCharacters(in: [" ", "\t"]).utf8
                guard !digits.isEmpty, digits.count <= 19, digits.allSatisfy({ (0x30...0x39).contains($0) }) else {
                    return "Content-Length is not one decimal number."
                }
            case "transfer-encoding":
                encodings += 1
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
        if lengths > 1 { return "More than one Content-Length header field." }
        if encodings > 1 { return "More than one Transfer-Encoding header field." }
        if lengths > 0 && encodings > 0 { return "Content-Length and Transfer-Encoding together." }
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
