import Foundation

/// A message or one of its MIME parts, read far enough for FETCH's sections and BODYSTRUCTURE: its header, its body
/// and, for a multipart, its children (RFC 2045/2046). A tolerant reader: what it cannot split stays one part.
struct IMAPMessagePart {
    /// The header block, its final empty line included.
    var header: ArraySlice<UInt8>
    /// The body.
    var body: ArraySlice<UInt8>
    /// The children of a multipart.
    var parts: [IMAPMessagePart] = []
    /// The Content-Type's type and subtype, in upper case.
    var type = "TEXT"
    var subtype = "PLAIN"
    /// Its parameters (names in upper case).
    var parameters: [(String, String)] = []
    /// The Content-Transfer-Encoding, in upper case.
    var encoding = "7BIT"

    init(_ bytes: ArraySlice<UInt8>, defaultType: (String, String) = ("TEXT", "PLAIN"), depth: Int = 0) {
        let split = Self.headerEnd(bytes)
        header = bytes[bytes.startIndex..<split]
        body = bytes[split...]
        (type, subtype) = defaultType
        if let contentType = field("Content-Type") {
            let pieces = contentType.split(separator: ";", omittingEmptySubsequences: true)
            let media = pieces.first.map { Self.trimmed($0).uppercased() } ?? ""
            let halves = media.split(separator: "/", maxSplits: 1)
            if halves.count == 2 {
                type = String(halves[0])
                subtype = String(halves[1])
            }
            parameters = pieces.dropFirst().compactMap { piece in
                guard let equals = piece.firstIndex(of: "=") else { return nil }
                let name = Self.trimmed(piece[..<equals]).uppercased()
                var value = String(Self.trimmed(piece[piece.index(after: equals)...]))
                if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 {
                    value = String(value.dropFirst().dropLast())
                }
                return (name, value)
            }
        }
        if let encoding = field("Content-Transfer-Encoding") {
            self.encoding = Self.trimmed(encoding[...]).uppercased()
        }
        if type == "MULTIPART", depth < 20,
            let boundary = parameters.first(where: { $0.0 == "BOUNDARY" })?.1, !boundary.isEmpty
        {
            let childType = subtype == "DIGEST" ? ("MESSAGE", "RFC822") : ("TEXT", "PLAIN")
            parts = Self.split(body, boundary: Array("--\(boundary)".utf8)).map {
                IMAPMessagePart($0, defaultType: childType, depth: depth + 1)
            }
            if parts.isEmpty { type = "TEXT" }
        }
    }

    /// `text` without the spaces and tabs around it (a header value's own trim: Foundation's goes through NSString
    /// and was a sixth of a FETCH's time).
    static func trimmed(_ text: Substring) -> Substring {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = text.firstIndex(where: { !blank($0) }), let last = text.lastIndex(where: { !blank($0) })
        else { return "" }
        return text[first...last]
    }

    /// Where the header ends (after its empty line), or the end when there is none.
    static func headerEnd(_ bytes: ArraySlice<UInt8>) -> Int {
        var index = bytes.startIndex
        var lineStart = true
        while index < bytes.endIndex {
            if lineStart {
                if bytes[index] == 0x0A { return index + 1 }
                if bytes[index] == 0x0D, index + 1 < bytes.endIndex, bytes[index + 1] == 0x0A { return index + 2 }
            }
            lineStart = bytes[index] == 0x0A
            index += 1
        }
        return bytes.endIndex
    }

    /// The unfolded value of the first header field called `name`: a scan of the header's bytes that decodes only
    /// the value it finds (FETCH BODYSTRUCTURE reads a few fields of every part of every message).
    func field(_ name: String) -> String? {
        let wanted = Array(name.utf8)
        var index = header.startIndex
        while index < header.endIndex {
            let lineStart = index
            // Does this line start with `name:` (ASCII, any case)?
            var matched = header.endIndex - lineStart > wanted.count
            if matched {
                for offset in 0..<wanted.count where header[lineStart + offset] | 0x20 != wanted[offset] | 0x20 {
                    matched = false
                    break
                }
                matched = matched && header[lineStart + wanted.count] == UInt8(ascii: ":")
            }
            // The line's end, continuation lines included.
            repeat {
                while index < header.endIndex, header[index] != 0x0A { index += 1 }
                if index < header.endIndex { index += 1 }
            } while index < header.endIndex && (header[index] == 0x20 || header[index] == 0x09)
            guard matched else { continue }
            var value: [UInt8] = []
            value.reserveCapacity(index - lineStart - wanted.count)
            for byte in header[(lineStart + wanted.count + 1)..<index] where byte != 0x0D && byte != 0x0A {
                value.append(byte)
            }
            let start = value.firstIndex { $0 != 0x20 && $0 != 0x09 } ?? value.endIndex
            let end = (value.lastIndex { $0 != 0x20 && $0 != 0x09 }).map { $0 + 1 } ?? start
            return String(decoding: value[start..<max(start, end)], as: UTF8.self)
        }
        return nil
    }

    /// The header's fields as (name, unfolded value), and the raw lines of each.
    static func fields(of header: ArraySlice<UInt8>) -> [(String, String, ArraySlice<UInt8>)] {
        var fields: [(String, String, ArraySlice<UInt8>)] = []
        var index = header.startIndex
        while index < header.endIndex {
            let start = index
            repeat {
                while index < header.endIndex, header[index] != 0x0A { index += 1 }
                if index < header.endIndex { index += 1 }
            } while index < header.endIndex && (header[index] == 0x20 || header[index] == 0x09)
            let raw = header[start..<index]
            let text = String(decoding: raw, as: UTF8.self)
            guard let colon = text.firstIndex(of: ":") else { continue }
            let value = text[text.index(after: colon)...].replacingOccurrences(of: "\r\n", with: "")
                .replacingOccurrences(of: "\n", with: "").trimmingCharacters(in: .whitespaces)
            fields.append((String(text[..<colon]), value, raw))
        }
        return fields
    }

    private static func split(_ body: ArraySlice<UInt8>, boundary: [UInt8]) -> [ArraySlice<UInt8>] {
        var starts: [(Int, Int)] = []  // (line start, content start)
        var index = body.startIndex
        var lineStart = true
        while index < body.endIndex {
            if lineStart, body[index...].starts(with: boundary) {
                var end = index + boundary.count
                let closing = body[end...].starts(with: [0x2D, 0x2D])
                while end < body.endIndex, body[end] != 0x0A { end += 1 }
                starts.append((index, end + 1))
                if closing { break }
            }
            lineStart = body[index] == 0x0A
            index += 1
        }
        guard starts.count >= 2 else { return [] }
        return (0..<(starts.count - 1)).map { number in
            var end = starts[number + 1].0
            // The CRLF before a delimiter belongs to the delimiter.
            if end > starts[number].1, body[end - 1] == 0x0A { end -= 1 }
            if end > starts[number].1, body[end - 1] == 0x0D { end -= 1 }
            return body[min(starts[number].1, end)..<end]
        }
    }

    /// The part at `path` (1-based numbers; a non-multipart message's part 1 is itself).
    func part(_ path: [Int]) -> IMAPMessagePart? {
        guard let first = path.first else { return self }
        if parts.isEmpty { return first == 1 ? self.part(Array(path.dropFirst())) : nil }
        guard first >= 1, first <= parts.count else { return nil }
        return parts[first - 1].part(Array(path.dropFirst()))
    }

    /// BODYSTRUCTURE (RFC 9051 section 7.5.2), without extension data beyond the multipart subtype's parameters.
    var structure: [UInt8] {
        if !parts.isEmpty {
            var out: [UInt8] = [UInt8(ascii: "(")]
            for part in parts { out += part.structure }
            out += Array(" ".utf8) + IMAPResponse.string(subtype) + Array(" ".utf8) + parameterList + Array(")".utf8)
            return out
        }
        var out: [UInt8] = Array("(".utf8) + IMAPResponse.string(type) + [0x20] + IMAPResponse.string(subtype)
        out += [0x20] + parameterList + [0x20]
        out += IMAPResponse.string(field("Content-ID")) + [0x20] + IMAPResponse.string(field("Content-Description"))
        out += [0x20] + IMAPResponse.string(encoding) + Array(" \(body.count)".utf8)
        if type == "TEXT" { out += Array(" \(body.reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) })".utf8) }
        return out + Array(")".utf8)
    }

    private var parameterList: [UInt8] {
        let kept = parameters.filter { $0.0 != "BOUNDARY" || !parts.isEmpty }
        guard !kept.isEmpty else { return Array("NIL".utf8) }
        var out: [UInt8] = [UInt8(ascii: "(")]
        for (index, (name, value)) in kept.enumerated() {
            if index > 0 { out.append(0x20) }
            out += IMAPResponse.string(name) + [0x20] + IMAPResponse.string(value)
        }
        return out + [UInt8(ascii: ")")]
    }
}
