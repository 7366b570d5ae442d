/// One event of the server's event stream, as a ``ChangeStreamTransport`` reads it.
public enum ChangeNotice: Sendable, Equatable {
    /// The account changed. `state` is the event's id, the account's state after the change (JMAP names each
    /// event by it, and `Last-Event-ID` names it back); `nil` when the event carried none.
    case changed(state: String?)
    /// A keep-alive: the connection is up and nothing changed.
    case ping
}
