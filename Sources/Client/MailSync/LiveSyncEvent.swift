/// What a ``LiveSync`` reports about the server's event stream, in order. The syncs it asks for are reported by
/// the ``SyncEngine`` with the trigger ``SyncTrigger/change(state:)``.
public enum LiveSyncEvent: Sendable, Equatable {
    /// The stream is open: changes reach the app as they are committed.
    case connected
    /// The stream is down and is reopened after `retryIn` (pushes drive sync meanwhile); `attempt` counts
    /// consecutive failures.
    case lost(MailSyncError, attempt: Int, retryIn: Duration)
    /// Following stopped: after ``MailSyncError/unauthorized`` until ``LiveSync/credentialsRenewed()``, otherwise
    /// for good. Pushes alone drive sync.
    case stopped(MailSyncError)
}
