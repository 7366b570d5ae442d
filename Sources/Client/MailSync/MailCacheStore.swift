/// The local copy of the mailbox: messages plus the sync state they correspond to.
///
/// Implementations must make ``apply(_:)`` and ``replaceAll(with:state:)`` atomic: after a failure the
/// cache still holds the previous messages and state. Calls may come from any thread.
public protocol MailCacheStore: Sendable {
    /// The sync state the cached messages correspond to, or `nil` before the first sync.
    func state() throws -> String?
    /// Applies one page of changes and moves the state to `changes.newState`, in one transaction.
    ///
    /// A created or updated message without a body keeps the body already cached for it.
    /// Returns what actually changed locally.
    @discardableResult
    func apply(_ changes: MessageChanges) throws -> ChangeCounts
    /// Replaces every cached message with `messages` and sets the state, in one transaction (a full resync).
    ///
    /// Bodies already cached are kept for messages that arrive without one. Returns the difference
    /// between the old and the new contents.
    @discardableResult
    func replaceAll(with messages: [MailMessage], state: String) throws -> ChangeCounts
    /// The cached messages, newest first; only those in `mailbox` when given.
    func messages(in mailbox: MailboxID?) throws -> [MailMessage]
    /// One cached message, or `nil`.
    func message(id: String) throws -> MailMessage?
    /// The number of cached messages.
    func messageCount() throws -> Int
    /// Stores a body fetched on demand. Does nothing when the message is not cached.
    func storeBody(_ body: String, forMessageID id: String) throws
    /// Stores the server's copy of one message (after a local action) without changing the state.
    func upsert(_ message: MailMessage) throws
    /// Removes one message (after a local delete) without changing the state.
    func remove(messageID id: String) throws
}
