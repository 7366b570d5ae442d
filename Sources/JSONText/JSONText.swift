/// JSON text written by hand, where a body's bytes are fixed by a contract (a JWT, an FCM message, a capture-log
/// line) or written for every event: no encoder is made for one string.
public enum JSONText {
    /// `text` as a JSON string literal: quotes and backslashes escaped, `\n`, `\r` and `\t` as such, other control
    /// characters as `\u00XX`; everything else as it is (UTF-8). Text with none of those is only put in quotes.
    public static func quoted(_ text: String) -> String {
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) {
            return "\"" + text + "\""
        }
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case let control where control.value < 0x20:
                let hex = String(control.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
