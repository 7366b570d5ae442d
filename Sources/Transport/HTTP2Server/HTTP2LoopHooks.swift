/// Work the event loop runs on its own thread around each round of socket events it handles.
///
/// A round reads whatever every ready connection sent (often many requests), runs inline handlers and
/// writes their responses. Hooks let an application group side effects per round, e.g. one wake-up of
/// another server's workers for all the notifications a round produced. Both closures run on the
/// event-loop thread and must be quick and must not block; `didHandleEvents` always follows
/// `willHandleEvents`.
public struct HTTP2LoopHooks: Sendable {
    /// Runs before the round's first event is handled.
    public var willHandleEvents: @Sendable () -> Void
    /// Runs after the round's last event is handled.
    public var didHandleEvents: @Sendable () -> Void

    /// Creates hooks from the two closures.
    public init(
        willHandleEvents: @escaping @Sendable () -> Void, didHandleEvents: @escaping @Sendable () -> Void
    ) {
        self.willHandleEvents = willHandleEvents
        self.didHandleEvents = didHandleEvents
    }
}
