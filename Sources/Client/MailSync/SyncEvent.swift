/// What a ``SyncEngine`` reports as it works, in order.
public enum SyncEvent: Sendable, Equatable {
    /// A run started; `fullResync` tells whether it begins with a full listing.
    case syncStarted(trigger: SyncTrigger, fullResync: Bool)
    /// A run ended; `messageCount` is the number of messages now cached, `duration` the run's wall time.
    case syncFinished(SyncReport, messageCount: Int, duration: Duration)
    /// A trigger was ignored because its signal carried the local state.
    case skipped(SyncTrigger)
    /// A step failed with a retryable error; the next attempt follows after `delay`.
    case retrying(attempt: Int, delay: Duration, error: MailSyncError)
}
