/// What a protocol's session asks its connection loop to do, in order.
package enum LoopAction<Answer: Sendable> {
    /// Queue these bytes for the peer.
    case send([UInt8])
    /// Put a question to the backend; the session reads nothing until the answer comes back through
    /// ``LoopSession/answered(_:)``. The closure runs on the loop's thread and must not block: it answers once, from
    /// any thread.
    case ask(@Sendable (_ connection: UInt64, _ answer: @escaping @Sendable (Answer) -> Void) -> Void)
    /// Send what is queued, then close.
    case close
}

/// A protocol on a ``ConnectionLoop``: a value-type state machine fed bytes, answers and events, returning actions.
/// It does no I/O of its own (STYLE 12): the loop moves the bytes, runs the TLS and the timers.
package protocol LoopSession: SendableMetatype {
    /// What the backend answers to the session's questions.
    associatedtype Answer: Sendable
    /// What the outside world tells a connection unasked (a mailbox changed).
    associatedtype Event: Sendable

    /// The greeting, once the connection is open (after the TLS handshake for a TLS listener).
    mutating func opened() -> [LoopAction<Answer>]
    /// Bytes the peer sent.
    mutating func received(_ bytes: UnsafeRawBufferPointer) -> [LoopAction<Answer>]
    /// The backend's answer to the last ``LoopAction/ask(_:)``.
    mutating func answered(_ answer: Answer) -> [LoopAction<Answer>]
    /// An event for this connection from ``ConnectionLoop/notify(_:_:)``. One that comes while the session waits for
    /// an answer is held and told once the answer is in (the latest only: an event says that something changed, so
    /// the latest stands for those before it), since the answer may have been read before what the event tells.
    mutating func notified(_ event: Event) -> [LoopAction<Answer>]
    /// The connection was silent for ``idleTimeoutMilliseconds``.
    mutating func timedOut() -> [LoopAction<Answer>]
    /// How long the peer may stay silent now, in milliseconds (it may change with the session's state).
    var idleTimeoutMilliseconds: Int { get }
    /// Called once when the connection closes, for whatever the session registered outside (subscriptions).
    func closed(connection: UInt64)
}
