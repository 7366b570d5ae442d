/// One event of a `text/event-stream` (Server-Sent Events).
public struct ServerSentEvent: Sendable, Equatable {
    /// The event type: the `event:` field, or `"message"` when the event has none.
    public var event: String
    /// The `data:` lines of the event joined with `"\n"`.
    public var data: String
    /// The last event ID seen on the stream so far (`id:` fields carry over to later events), or `nil`.
    public var id: String?
    /// The reconnection time in milliseconds if this event carried a `retry:` field.
    public var retry: Int?

    /// Creates an event value.
    public init(event: String = "message", data: String, id: String? = nil, retry: Int? = nil) {
        self.event = event
        self.data = data
        self.id = id
        self.retry = retry
    }
}
