/// How the sync engine talks to the mailbox server.
///
/// Implementations throw ``MailSyncError`` values (any other error is treated as a network failure) and
/// `CancellationError` when the calling task is cancelled. An app can implement it over `URLSession`;
/// `MailSyncHTTP` implements it over libcurl.
public protocol MailTransport: Sendable {
    /// One page of changes since `state`, at most `max` entries: `GET /v1/changes?since=…&max=…`.
    func fetchChanges(since state: String, max: Int) async throws -> MessageChanges
    /// One page of the full listing: `GET /v1/messages?cursor=…&limit=…` (`cursor` `nil` for the first page).
    func fetchAllMessages(cursor: String?, limit: Int) async throws -> MessagePage
    /// One message with its body: `GET /v1/messages/{id}`.
    func fetchMessage(id: String) async throws -> MailMessage
    /// Changes a message's flags or mailbox and returns it: `PATCH /v1/messages/{id}`.
    func updateMessage(id: String, _ update: MessageUpdate) async throws -> MailMessage
    /// Destroys a message: `DELETE /v1/messages/{id}`.
    func deleteMessage(id: String) async throws
}
