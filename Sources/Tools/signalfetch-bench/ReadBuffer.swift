/// What a bench client read from one connection and has not taken yet, and the HTTP/1.1 answers in it: a head up to
/// its blank line, then a body of its Content-Length (how the servers the bench measures answer it). Each call that
/// needs more bytes calls `fill`, which reads from the connection and appends to the array it is given (and throws
/// when the connection ended).
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

    /// Reads until at least `count` bytes are not taken.
    mutating func need(_ count: Int, fill: (inout [UInt8]) throws -> Void) throws {
        while available < count { try fill(&bytes) }
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
