/// A ``MailTransport`` that can also hold the server's event stream, for an app that is awake: each change is
/// announced as it is committed, so the app syncs at once instead of waiting for a push (see ``LiveSync``).
///
/// `MailSyncHTTP` implements it over JMAP's event source (`GET /jmap/eventsource`); an app can implement it
/// over `URLSession`'s byte stream.
public protocol ChangeStreamTransport: MailTransport {
    /// Opens the stream and returns once the server accepted it (a 200 with `text/event-stream`); its events follow
    /// in order, and it ends (or throws) when the connection does. Cancelling the iteration closes the connection.
    ///
    /// `lastEventID`, when given, is sent as `Last-Event-ID`: the server then announces at once any change made
    /// since that event. `pingInterval` asks the server for keep-alive events. Refusals throw ``MailSyncError``
    /// values as the other calls do (401 ``MailSyncError/unauthorized``, 404 ``MailSyncError/notFound``).
    func openChangeStream(
        lastEventID: String?, pingInterval: Duration
    ) async throws -> AsyncThrowingStream<ChangeNotice, any Error>
}
