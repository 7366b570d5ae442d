/// A small, strict JSON reader (RFC 8259) for the payload guard.
///
/// Unlike `JSONSerialization` it keeps object members in order, reports duplicate keys, and keeps numbers
/// as their source text, so the guard can tell `1` from `1.0` or `true`.
enum StrictJSON {
    /// A parsed JSON value.
    indirect enum Value {
        case object([(key: String, value: Value)])
        case array([Value])
        case string(String)
        case number(String)
        case bool(Bool)
        case null
    }

    struct ParseError: Error {}

    /// Parses one JSON value that must span all of `bytes` (surrounding whitespace allowed).
    static func parse(_ bytes: [UInt8]) throws(ParseError) -> Value {
        var parser = Parser(bytes: bytes)
        let value = try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw ParseError() }
        return value
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        mutating func skipWhitespace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        mutating func expect(_ byte: UInt8) throws(ParseError) {
            guard index < bytes.count, bytes[index] == byte else { throw ParseError() }
            index += 1
        }

        mutating func parseValue(depth: Int) throws(ParseError) -> Value {
            guard depth < 32 else { throw ParseError() }
            skipWhitespace()
            guard index < bytes.count else { throw ParseError() }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try parseObject(depth: depth)
            case UInt8(ascii: "["): return try parseArray(depth: depth)
            case UInt8(ascii: "\""): return .string(try parseString())
            case UInt8(ascii: "t"):
                try literal("true")
                return .bool(true)
            case UInt8(ascii: "f"):
                try literal("false")
                return .bool(false)
            case UInt8(ascii: "n"):
                try literal("null")
                return .null
            default: return .number(try parseNumber())
            }
        }

        mutating func literal(_ word: String) throws(ParseError) {
            for byte in word.utf8 { try expect(byte) }
        }

        mutating func parseObject(depth: Int) throws(ParseError) -> Value {
            try expect(UInt8(ascii: "{"))
            var members: [(key: String, value: Value)] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                let key = try parseString()
                skipWhitespace()
                try expect(UInt8(ascii: ":"))
                let value = try parseValue(depth: depth + 1)
                members.append((key, value))
                skipWhitespace()
                guard index < bytes.count else { throw ParseError() }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                try expect(UInt8(ascii: "}"))
                return .object(members)
            }
        }

        mutating func parseArray(depth: Int) throws(ParseError) -> Value {
            try expect(UInt8(ascii: "["))
            var elements: [Value] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            }
            while true {
                elements.append(try parseValue(depth: depth + 1))
                skipWhitespace()
                guard index < bytes.count else { throw ParseError() }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                try expect(UInt8(ascii: "]"))
                return .array(elements)
            }
        }

        mutating func parseString() throws(ParseError) -> String {
            try expect(UInt8(ascii: "\""))
            // Fast path: no escapes before the closing quote, so the string is the bytes in between.
            var scan = index
            while scan < bytes.count {
                let byte = bytes[scan]
                if byte == UInt8(ascii: "\"") {
                    guard let text = String(validating: bytes[index..<scan], as: UTF8.self) else { throw ParseError() }
                    index = scan + 1
                    return text
                }
                if byte == UInt8(ascii: "\\") || byte < 0x20 { break }
                scan += 1
            }
            var scalars = String.UnicodeScalarView()
            var raw: [UInt8] = []
            func flush() throws(ParseError) {
                guard !raw.isEmpty else { return }
                guard let text = String(validating: raw, as: UTF8.self) else { throw ParseError() }
                scalars.append(contentsOf: text.unicodeScalars)
                raw.removeAll()
            }
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    try flush()
                    return String(scalars)
                case UInt8(ascii: "\\"):
                    try flush()
                    guard index < bytes.count else { throw ParseError() }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""): scalars.append("\"")
                    case UInt8(ascii: "\\"): scalars.append("\\")
                    case UInt8(ascii: "/"): scalars.append("/")
                    case UInt8(ascii: "b"): scalars.append("\u{08}")
                    case UInt8(ascii: "f"): scalars.append("\u{0C}")
                    case UInt8(ascii: "n"): scalars.append("\n")
                    case UInt8(ascii: "r"): scalars.append("\r")
                    case UInt8(ascii: "t"): scalars.append("\t")
                    case UInt8(ascii: "u"):
                        var code = try hex4()
                        if (0xD800...0xDBFF).contains(code) {
                            try literal("\\u")
                            let low = try hex4()
                            guard (0xDC00...0xDFFF).contains(low) else { throw ParseError() }
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let scalar = Unicode.Scalar(code) else { throw ParseError() }
                        scalars.append(scalar)
                    default: throw ParseError()
                    }
                case 0x00..<0x20: throw ParseError()
                default: raw.append(byte)
                }
            }
            throw ParseError()
        }

        mutating func hex4() throws(ParseError) -> UInt32 {
            guard index + 4 <= bytes.count else { throw ParseError() }
            var code: UInt32 = 0
            for byte in bytes[index..<index + 4] {
                guard let digit = hexValue(byte) else { throw ParseError() }
                code = code << 4 | digit
            }
            index += 4
            return code
        }

        func hexValue(_ byte: UInt8) -> UInt32? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
            default: nil
            }
        }

        /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, returned as source text.
        mutating func parseNumber() throws(ParseError) -> String {
            let start = index
            func isDigit(_ i: Int) -> Bool {
                i < bytes.count && bytes[i] >= UInt8(ascii: "0") && bytes[i] <= UInt8(ascii: "9")
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard isDigit(index) else { throw ParseError() }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else {
                while isDigit(index) { index += 1 }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard isDigit(index) else { throw ParseError() }
                while isDigit(index) { index += 1 }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                    index += 1
                }
                guard isDigit(index) else { throw ParseError() }
                while isDigit(index) { index += 1 }
            }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }
    }
}
