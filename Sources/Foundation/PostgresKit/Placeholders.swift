/// Rewrites `?` placeholders as PostgreSQL's `$1`, `$2`, … in order, leaving string literals, quoted identifiers
/// and comments alone.
func numberedPlaceholders(_ sql: String) -> String {
    var output: [UInt8] = []
    output.reserveCapacity(sql.utf8.count + 16)
    var count = 0
    var quote: UInt8?  // inside '…' or "…"
    var lineComment = false
    var previous: UInt8 = 0
    for byte in sql.utf8 {
        defer { previous = byte }
        if lineComment {
            if byte == 0x0A { lineComment = false }
            output.append(byte)
            continue
        }
        if let open = quote {
            if byte == open { quote = nil }  // a doubled quote reopens on the next byte: same result
            output.append(byte)
            continue
        }
        switch byte {
        case UInt8(ascii: "'"), UInt8(ascii: "\""):
            quote = byte
            output.append(byte)
        case UInt8(ascii: "-") where previous == UInt8(ascii: "-"):
            lineComment = true
            output.append(byte)
        case UInt8(ascii: "?"):
            count += 1
            output.append(UInt8(ascii: "$"))
            output.append(contentsOf: String(count).utf8)
        default:
            output.append(byte)
        }
    }
    return String(decoding: output, as: UTF8.self)
}
