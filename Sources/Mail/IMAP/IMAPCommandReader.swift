/// Frames an IMAP client's input into whole commands: a line, and for each literal (`{N}`, `{N+}`, `~{N}`) at a
/// line's end its N bytes and the rest of the command (RFC 9051 section 4.3). A value type fed bytes; it does no
/// I/O and holds at most one command.
package struct IMAPCommandReader {
    /// What the reader found in the input.
    package enum Event: Equatable {
        /// A whole command's bytes, literals included.
        case command([UInt8])
        /// A synchronizing literal was announced: the client waits for a continuation request.
        case literalAnnounced
        /// The command line is longer than the limit (no literal counted): refused, the rest of the line dropped.
        case lineTooLong(tag: String)
        /// A literal over the limit. `synchronizing`: the client sends nothing until told, so the command ends here;
        /// otherwise its bytes follow at once and the connection cannot go on.
        case literalTooLarge(tag: String, synchronizing: Bool)
    }

    /// The longest command line, literals aside.
    let maxLineBytes: Int
    /// The largest literal (the message size limit).
    let maxLiteralBytes: Int

    private var command: [UInt8] = []
    /// Bytes of the current line (since the last literal) already in `command`.
    private var lineStart = 0
    private var literalLeft = 0
    private var discardingLine = false
    /// A non-synchronizing literal over the limit: its bytes cannot be told from commands, so nothing more is read.
    private var failed = false
    private var scanFrom = 0

    package init(maxLineBytes: Int, maxLiteralBytes: Int) {
        self.maxLineBytes = maxLineBytes
        self.maxLiteralBytes = maxLiteralBytes
    }

    /// Takes `bytes` and returns what they completed, in order. A `.command` hands over the command: later bytes
    /// belong to the next one.
    package mutating func feed(_ bytes: UnsafeRawBufferPointer, _ emit: (Event) -> Void) {
        var index = 0
        while index < bytes.count, !failed {
            if literalLeft > 0 {
                let take = min(literalLeft, bytes.count - index)
                command.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<index + take]))
                literalLeft -= take
                index += take
                if literalLeft == 0 {
                    lineStart = command.count
                    scanFrom = command.count
                }
                continue
            }
            let byte = bytes[index]
            index += 1
            if discardingLine {
                if byte == 0x0A {
                    discardingLine = false
                    resetCommand()
                }
                continue
            }
            command.append(byte)
            guard byte == 0x0A else {
                if command.count - lineStart > maxLineBytes {
                    let tag = Self.tag(of: command)
                    discardingLine = true
                    resetCommand()
                    emit(.lineTooLong(tag: tag))
                }
                continue
            }
            // A line's end: a literal announcement, or the command's end.
            let lineEnd = command.count - (command.count >= 2 && command[command.count - 2] == 0x0D ? 2 : 1)
            if let (size, synchronizing) = Self.literal(endingAt: lineEnd, in: command, from: lineStart) {
                guard size <= maxLiteralBytes else {
                    let tag = Self.tag(of: command)
                    resetCommand()
                    if !synchronizing { failed = true }
                    emit(.literalTooLarge(tag: tag, synchronizing: synchronizing))
                    continue
                }
                literalLeft = size
                if size == 0 {
                    lineStart = command.count
                }
                if synchronizing { emit(.literalAnnounced) }
                continue
            }
            let whole = command
            resetCommand()
            emit(.command(whole))
        }
    }

    private mutating func resetCommand() {
        command = []
        lineStart = 0
        scanFrom = 0
        literalLeft = 0
    }

    /// The command's tag, as far as it can be read (for a refusal).
    static func tag(of bytes: [UInt8]) -> String {
        let tag = bytes.prefix { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "{") }.prefix(64)
        return tag.isEmpty ? "*" : String(decoding: tag, as: UTF8.self)
    }

    /// `{N}`, `{N+}` (LITERAL+), or `~{N}` (a literal8) just before `end`: its size and whether it is
    /// synchronizing.
    static func literal(endingAt end: Int, in bytes: [UInt8], from start: Int) -> (Int, Bool)? {
        guard end > start, bytes[end - 1] == UInt8(ascii: "}") else { return nil }
        var index = end - 2
        var synchronizing = true
        if index >= start, bytes[index] == UInt8(ascii: "+") {
            synchronizing = false
            index -= 1
        }
        var digitsEnd = index + 1
        while index >= start, (0x30...0x39).contains(bytes[index]) { index -= 1 }
        guard index >= start, bytes[index] == UInt8(ascii: "{"), index + 1 < digitsEnd else { return nil }
        digitsEnd = min(digitsEnd, index + 1 + 12)
        guard let size = Int(String(decoding: bytes[(index + 1)..<digitsEnd], as: UTF8.self)) else { return nil }
        // 12 digits at most were read: anything longer is over every limit anyway.
        return end - 1 - (synchronizing ? 0 : 1) - (index + 1) > 12 ? (Int.max, synchronizing) : (size, synchronizing)
    }
}
