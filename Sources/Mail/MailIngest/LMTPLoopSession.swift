import ConnectionLoop

/// ``LMTPSession`` on a ``ConnectionLoop``: its replies become sends, its recipient lookups and deliveries questions
/// to the ``LMTPBackend``; the loop does the rest.
struct LMTPLoopSession: LoopSession {
    /// What the backend answered.
    enum Answer: Sendable {
        case recipient(LMTPSession.RecipientCheck)
        case delivered([LMTPSession.DeliveryResult])
    }

    /// Nothing is told to an LMTP connection unasked.
    enum Event: Sendable {}

    private var session: LMTPSession
    private let backend: any LMTPBackend
    private let log: @Sendable (String) -> Void
    let idleTimeoutMilliseconds: Int
    /// Copies stored in this session, for the log line when it ends.
    private var delivered = 0

    init(
        configuration: LMTPSession.Configuration, idleTimeoutMilliseconds: Int, backend: any LMTPBackend,
        log: @escaping @Sendable (String) -> Void
    ) {
        session = LMTPSession(configuration: configuration)
        self.idleTimeoutMilliseconds = idleTimeoutMilliseconds
        self.backend = backend
        self.log = log
    }

    mutating func opened() -> [LoopAction<Answer>] { [.send(Array(session.greeting.utf8))] }

    mutating func received(_ bytes: UnsafeRawBufferPointer) -> [LoopAction<Answer>] {
        convert(session.receive(bytes))
    }

    mutating func answered(_ answer: Answer) -> [LoopAction<Answer>] {
        switch answer {
        case .recipient(let check):
            return convert(session.recipientVerified(check))
        case .delivered(let results):
            delivered += results.filter { $0 == .stored }.count
            return convert(session.delivered(results))
        }
    }

    mutating func notified(_ event: Event) -> [LoopAction<Answer>] {}

    mutating func timedOut() -> [LoopAction<Answer>] { convert(session.timedOut()) }

    func closed(connection: UInt64) {
        if delivered > 0 { log("lmtp: session ended after \(delivered) message(s)") }
    }

    private func convert(_ actions: [LMTPSession.Action]) -> [LoopAction<Answer>] {
        let backend = backend
        return actions.map { action in
            switch action {
            case .send(let text): .send(Array(text.utf8))
            case .close: .close
            case .verifyRecipient(let address):
                .ask { _, answer in backend.checkRecipient(address) { answer(.recipient($0)) } }
            case .deliver(let envelope, let message):
                .ask { _, answer in backend.deliver(envelope, message: message) { answer(.delivered($0)) } }
            }
        }
    }
}
