import MailboxStore

/// The store's state type (the module's `MailboxStore` class hides the module name in qualified lookups).
typealias StoreSyncState = SyncState
