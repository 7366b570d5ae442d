/// One LMTP server session (RFC 2033) as a value: it is fed the bytes a client sends and answers with
/// ``Action``s — replies to send, a recipient to look up, a message to store, the connection to close — which the
/// socket loop carries out. It knows nothing of sockets, threads or the store, so every command is tested without
/// either.
///
/// Pipelined commands are answered in order: after ``Action/verifyRecipient(_:)`` or ``Action/deliver(_:message:)``
/// the session holds the rest of the input until ``recipientVerified(_:)`` or ``delivered(_:)`` reports the result.
/// After DATA there is one reply per accepted recipient, in RCPT order. Only CRLF.CRLF ends the message (a bare-LF
/// dot line is message text, so nothing can be smuggled past the end), and dot-stuffed lines are unstuffed.
public struct LMTPSession: Sendable {
    /// The limits and the name the session announces.
    public struct Configuration: Sendable {
        /// The name in the greeting and the LHLO reply; it must differ from the MTA's own.
        public var hostname: String
        /// The largest message accepted, in bytes (announced as SIZE).
        public var maxMessageBytes: Int
        /// The most recipients of one message.
        public var maxRecipients: Int
        /// The longest command line, CRLF included (RFC 5321 gives 512).
        public var maxCommandLineBytes: Int

        /// Creates a configuration.
        public init(
            hostname: String, maxMessageBytes: Int = 25 << 20, maxRecipients: Int = 100, maxCommandLineBytes: Int = 512
        ) {
            self.hostname = hostname
            self.maxMessageBytes = maxMessageBytes
            self.maxRecipients = maxRecipients
            self.maxCommandLineBytes = maxCommandLineBytes
        }
    }

    /// The sender and the accepted recipients of one message.
    public struct Envelope: Sendable, Equatable {
        /// The reverse path (`MAIL FROM`), empty for a bounce.
        public var sender: String
        /// The accepted forward paths, in RCPT order.
        public var recipients: [String]

        /// Creates an envelope.
        public init(sender: String, recipients: [String]) {
            self.sender = sender
            self.recipients = recipients
        }
    }

    /// What a recipient lookup found.
    public enum RecipientCheck: Sendable, Equatable {
        /// An account receives mail at the address.
        case exists
        /// No account does (`550 5.1.1`: the MTA bounces for this recipient only).
        case unknown
        /// The lookup could not be made (`451 4.3.0`: the MTA tries this recipient again later).
        case unavailable
    }

    /// What became of one recipient's copy.
    public enum DeliveryResult: Sendable, Equatable {
        /// Committed: the copy survives a crash.
        case stored
        /// The account went away after RCPT: nothing stored, the MTA bounces.
        case unknownRecipient
        /// Nothing was stored; the MTA should try again later.
        case storageUnavailable
    }

    /// What the socket loop does next.
    public enum Action: Sendable, Equatable {
        /// Send these reply lines (CRLF included).
        case send(String)
        /// Look the recipient up and call ``recipientVerified(_:)``; input waits meanwhile.
        case verifyRecipient(String)
        /// Store `message` for every recipient and call ``delivered(_:)`` with one result each, in order.
        case deliver(Envelope, message: [UInt8])
        /// Close the connection (after QUIT, or after a reply that ends the session).
        case close
    }

    private enum State: Sendable {
        /// Before LHLO.
        case greeted
        /// After LHLO, no transaction.
        case ready
        /// MAIL accepted; recipients so far.
        case transaction(sender: String, recipients: [String])
        /// RCPT sent for lookup.
        case verifying(sender: String, recipients: [String], candidate: String)
        /// Inside DATA.
        case data(sender: String, recipients: [String], message: [UInt8], tooLarge: Bool)
        /// The message went to the store.
        case delivering(recipients: [String])
        /// QUIT or a fatal error.
        case closed

        var isTransaction: Bool {
            if case .transaction = self { return true }
            return false
        }
    }

    /// The configuration the session runs with.
    public let configuration: Configuration
    private var state = State.greeted
    private var input: [UInt8] = []
    private var inputStart = 0
    /// In DATA: whether the next byte starts a line (dot-stuffing and the end mark apply only there).
    private var atLineStart = true

    /// In DATA, a line longer than this without its CRLF is taken into the message in pieces, so an endless line
    /// cannot fill memory (the size limit then applies as to any text).
    static let partialLineLimit = 64 * 1024

    /// A session for a new connection.
    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// The greeting to send when the connection opens.
    public var greeting: String { "220 \(configuration.hostname) LMTP ready\r\n" }

    /// Whether the session has ended.
    public var isClosed: Bool {
        if case .closed = state { return true }
        return false
    }

    /// Takes bytes from the client and answers what can be answered now.
    public mutating func receive(_ bytes: some Sequence<UInt8>) -> [Action] {
        guard !isClosed else { return [] }
        input.append(contentsOf: bytes)
        return process()
    }

    /// Reports the lookup asked for by ``Action/verifyRecipient(_:)`` and goes on with the input.
    public mutating func recipientVerified(_ check: RecipientCheck) -> [Action] {
        guard case .verifying(let sender, var recipients, let candidate) = state else { return [] }
        var actions: [Action]
        switch check {
        case .exists:
            recipients.append(candidate)
            actions = [.send("250 2.1.5 Recipient OK\r\n")]
        case .unknown:
            actions = [.send("550 5.1.1 No such user here\r\n")]
        case .unavailable:
            actions = [.send("451 4.3.0 Mailbox lookup unavailable, try again later\r\n")]
        }
        state = .transaction(sender: sender, recipients: recipients)
        actions += process()
        return actions
    }

    /// Reports what became of each recipient's copy (one result each, in RCPT order) and goes on with the input.
    public mutating func delivered(_ results: [DeliveryResult]) -> [Action] {
        guard case .delivering(let recipients) = state else { return [] }
        precondition(results.count == recipients.count, "one result per recipient")
        var replies = ""
        for (recipient, result) in zip(recipients, results) {
            switch result {
            case .stored: replies += "250 2.0.0 <\(recipient)> delivered\r\n"
            case .unknownRecipient: replies += "550 5.1.1 <\(recipient)> no such user here\r\n"
            case .storageUnavailable: replies += "451 4.3.0 <\(recipient)> storage unavailable, try again later\r\n"
            }
        }
        state = .ready
        return [.send(replies)] + process()
    }

    /// The client sent nothing for too long: the session ends.
    public mutating func timedOut() -> [Action] {
        guard !isClosed else { return [] }
        state = .closed
        return [.send("421 4.4.2 \(configuration.hostname) timeout, closing the connection\r\n"), .close]
    }

    // MARK: - Input

    private mutating func process() -> [Action] {
        var actions: [Action] = []
        while true {
            switch state {
            case .verifying, .delivering, .closed:
                compact()
                return actions
            case .data:
                guard let line = nextLine(limit: nil) else {
                    if input.count - inputStart > Self.partialLineLimit {
                        // All but the last byte, which may be the CR of a CRLF still on its way.
                        let piece = input[inputStart..<(input.count - 1)]
                        inputStart = input.count - 1
                        _ = dataText(piece, endsLine: false)
                    }
                    compact()
                    return actions
                }
                if let action = dataText(line, endsLine: true) { actions.append(action) }
            case .greeted, .ready, .transaction:
                guard let line = nextLine(limit: configuration.maxCommandLineBytes) else {
                    if input.count - inputStart > configuration.maxCommandLineBytes {
                        state = .closed
                        actions += [.send("500 5.5.2 Line too long\r\n"), .close]
                    }
                    compact()
                    return actions
                }
                actions += command(line)
            }
        }
    }

    /// The next CRLF-terminated line (CRLF included), if one is complete.
    private mutating func nextLine(limit: Int?) -> ArraySlice<UInt8>? {
        var index = inputStart
        while index + 1 < input.count {
            if input[index] == 0x0D, input[index + 1] == 0x0A {
                let line = input[inputStart..<(index + 2)]
                inputStart = index + 2
                return line
            }
            index += 1
            if let limit, index - inputStart >= limit { return nil }
        }
        return nil
    }

    private mutating func compact() {
        if inputStart > 0 {
            input.removeFirst(inputStart)
            inputStart = 0
        }
    }

    // MARK: - Message text

    /// Message text: a whole line (CRLF included) or, for an overlong line, a piece of one.
    private mutating func dataText(_ line: ArraySlice<UInt8>, endsLine: Bool) -> Action? {
        guard case .data(let sender, let recipients, var message, var tooLarge) = state else { return nil }
        state = .closed  // a placeholder while `message` grows in place (no copy of the buffer per line)
        let lineStart = atLineStart
        atLineStart = endsLine
        if lineStart, endsLine, line.count == 3, line.first == UInt8(ascii: ".") {
            if tooLarge {
                state = .ready
                let reply = "552 5.3.4 Message exceeds the size limit of \(configuration.maxMessageBytes) bytes\r\n"
                return .send(String(repeating: reply, count: recipients.count))
            }
            state = .delivering(recipients: recipients)
            return .deliver(Envelope(sender: sender, recipients: recipients), message: message)
        }
        // A leading dot was doubled by the client (RFC 5321, section 4.5.2).
        let text = lineStart && line.first == UInt8(ascii: ".") ? line.dropFirst() : line
        if !tooLarge {
            if message.count + text.count > configuration.maxMessageBytes {
                tooLarge = true
                message = []
            } else {
                message.append(contentsOf: text)
            }
        }
        state = .data(sender: sender, recipients: recipients, message: message, tooLarge: tooLarge)
        return nil
    }

    // MARK: - Commands

    private mutating func command(_ line: ArraySlice<UInt8>) -> [Action] {
        let text = String(decoding: line.dropLast(2), as: UTF8.self)
        let verb = text.prefix { $0 != " " }.uppercased()
        let argument = text.dropFirst(verb.count).drop { $0 == " " }
        switch verb {
        case "LHLO":
            guard !argument.isEmpty else { return [.send("501 5.5.4 LHLO needs a host name\r\n")] }
            state = .ready
            let name = configuration.hostname
            return [
                .send(
                    "250-\(name)\r\n250-PIPELINING\r\n250-ENHANCEDSTATUSCODES\r\n250-8BITMIME\r\n250-SMTPUTF8\r\n"
                        + "250 SIZE \(configuration.maxMessageBytes)\r\n")
            ]
        case "HELO", "EHLO":
            return [.send("500 5.5.1 This is an LMTP server: use LHLO\r\n")]
        case "MAIL":
            return mail(argument)
        case "RCPT":
            return recipient(argument)
        case "DATA":
            guard argument.isEmpty else { return [.send("501 5.5.4 DATA takes no argument\r\n")] }
            // A client must wait for 354 before sending the message (RFC 2920, section 3.1); one that does not has
            // its text read as its own commands, within its own session. Refusing more than that would depend on
            // how TCP happened to cut the input (whether the text was already here), which the fuzzer checks.
            guard case .transaction(let sender, let recipients) = state, !recipients.isEmpty else {
                return [.send("503 5.5.1 \(state.isTransaction ? "No valid recipients" : "MAIL and RCPT first")\r\n")]
            }
            state = .data(sender: sender, recipients: recipients, message: [], tooLarge: false)
            atLineStart = true
            return [.send("354 Start mail input; end with <CRLF>.<CRLF>\r\n")]
        case "RSET":
            if case .greeted = state {} else { state = .ready }
            return [.send("250 2.0.0 OK\r\n")]
        case "NOOP":
            return [.send("250 2.0.0 OK\r\n")]
        case "QUIT":
            state = .closed
            return [.send("221 2.0.0 \(configuration.hostname) closing connection\r\n"), .close]
        case "VRFY":
            return [.send("252 2.5.2 Cannot verify the user, but will accept the message\r\n")]
        default:
            return [.send("500 5.5.2 Command not recognized\r\n")]
        }
    }

    private mutating func mail(_ argument: Substring) -> [Action] {
        switch state {
        case .greeted: return [.send("503 5.5.1 LHLO first\r\n")]
        case .transaction: return [.send("503 5.5.1 Nested MAIL command\r\n")]
        default: break
        }
        guard let (path, parameters) = Self.path(after: "FROM:", in: argument) else {
            return [.send("501 5.5.4 Syntax: MAIL FROM:<address>\r\n")]
        }
        for parameter in parameters {
            let parts = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            switch parts[0].uppercased() {
            case "SIZE":
                guard parts.count == 2, let size = Int(parts[1]), size >= 0 else {
                    return [.send("501 5.5.4 SIZE needs a number\r\n")]
                }
                if size > configuration.maxMessageBytes {
                    return [
                        .send("552 5.3.4 Message size exceeds the limit of \(configuration.maxMessageBytes) bytes\r\n")
                    ]
                }
            case "BODY":
                guard parts.count == 2, ["7BIT", "8BITMIME"].contains(parts[1].uppercased()) else {
                    return [.send("501 5.5.4 BODY is 7BIT or 8BITMIME\r\n")]
                }
            case "SMTPUTF8":
                guard parts.count == 1 else { return [.send("501 5.5.4 SMTPUTF8 takes no value\r\n")] }
            default:
                return [.send("555 5.5.4 Unsupported MAIL parameter\r\n")]
            }
        }
        state = .transaction(sender: path, recipients: [])
        return [.send("250 2.1.0 Sender OK\r\n")]
    }

    private mutating func recipient(_ argument: Substring) -> [Action] {
        guard case .transaction(let sender, let recipients) = state else {
            return [.send("503 5.5.1 MAIL first\r\n")]
        }
        guard let (path, parameters) = Self.path(after: "TO:", in: argument), !path.isEmpty else {
            return [.send("501 5.5.4 Syntax: RCPT TO:<address>\r\n")]
        }
        guard parameters.isEmpty else { return [.send("555 5.5.4 Unsupported RCPT parameter\r\n")] }
        guard recipients.count < configuration.maxRecipients else {
            return [.send("452 4.5.3 Too many recipients\r\n")]
        }
        state = .verifying(sender: sender, recipients: recipients, candidate: path)
        return [.verifyRecipient(path)]
    }

    /// `FROM:<path> PARAM…` → the path between the angle brackets and the parameters after it.
    static func path(after keyword: String, in argument: Substring) -> (String, [Substring])? {
        guard argument.uppercased().hasPrefix(keyword) else { return nil }
        let rest = argument.dropFirst(keyword.count).drop { $0 == " " }
        guard rest.first == "<", let close = rest.firstIndex(of: ">") else { return nil }
        let path = String(rest[rest.index(after: rest.startIndex)..<close])
        guard !path.contains(where: { $0 == " " || $0 == "<" || $0.asciiValue.map { $0 < 0x20 } == true }) else {
            return nil
        }
        let parameters = rest[rest.index(after: close)...].split(separator: " ")
        return (path, parameters)
    }
}
