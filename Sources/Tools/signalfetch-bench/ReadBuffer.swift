/// What a bench client read from one connection and has not taken yet, and the HTTP/1.1 answers (a head up to its
/// blank line, then a body of its Content-Length, as the servers the bench measures answer) or WebSocket frames in it.
/// Each call that needs more bytes calls `fill`, which reads from the connection and appends to the array it is given
/// (and throws when the connection ended).
struct ReadBuffer {
    /// Everything read; the untaken part starts at ``start``.
    private(set) var bytes: [UInt8] = []
    /// Where the untaken bytes start.
    var start = 0

    /// How many bytes are read and not taken.
    var available: Int { bytes.count - start }

    /// Forgets what was taken (positions found before are no longer valid).
    mutating func compact() {
        guard start > 0 else { return }
        bytes.removeFirst(start)
        start = 0
    }

    /// Appends bytes read from the connection.
    mutating func append(_ more: UnsafeRawBufferPointer) { bytes.append(contentsOf: more) }

    /// Reads more from the connection.
    mutating func more(fill: (inout [UInt8]) throws -> Void) throws { try fill(&bytes) }

    /// Takes the next whole server frame (RFC 6455 §5.2, unmasked) that starts at ``start``: its first byte (FIN and
    /// opcode) and its payload; nil until the frame is whole.
    mutating func frame() -> (first: UInt8, payload: ArraySlice<UInt8>)? {
        guard available >= 2 else { return nil }
        var size = Int(bytes[start + 1] & 0x7f)
        var at = start + 2
        if size == 126 {
            guard available >= 4 else { return nil }
            size = Int(bytes[at]) << 8 | Int(bytes[at + 1])
            at += 2
        } else if size == 127 {
            guard available >= 10 else { return nil }
            size = bytes[at..<at + 8].reduce(0) { $0 << 8 | Int($1) }
            at += 8
        }
        guard bytes.count >= at + size else { return nil }
        let first = bytes[start]
        start = at + size
        return (first, bytes[at..<at + size])
    }

    /// Where the head that starts at ``start`` ends (its blank line), reading until it is whole.
    mutating func headEnd(fill: (inout [UInt8]) throws -> Void) throws -> Int {
        var from = start
        while true {
            if let end = DeviceBenchmarks.find(bytes[from...], Self.blankLine) { return end }
            from = max(start, bytes.count - 3)
            try fill(&bytes)
        }
    }

    /// Takes the next answer: its head (the status line and fields, as sent) and its body.
    mutating func answer(fill: (inout [UInt8]) throws -> Void) throws -> (head: String, body: ArraySlice<UInt8>) {
        let end = try headEnd(fill: fill)
        let head = String(decoding: bytes[start..<end], as: UTF8.self)
        var length = 0
        for line in head.split(separator: "\r\n").dropFirst() {
            guard let colon = line.firstIndex(of: ":"), line[..<colon].lowercased() == "content-length" else {
                continue
            }
            length = Int(line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)) ?? 0
        }
        let body = end + 4
        while bytes.count < body + length { try fill(&bytes) }
        start = body + length
        return (head, bytes[body..<body + length])
    }

    private static let blankLine = Array("\r\n\r\n".utf8)
}
