/// Why a mailbox operation did not happen.
public enum MailboxStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No such message, mailbox, account or device for this account.
    case notFound
    /// The username is taken.
    case usernameTaken
    /// The account already has the most devices allowed (``MailboxStore/Configuration/maximumDevicesPerAccount``).
    case tooManyDevices
    /// A value is not acceptable (the text says which, never the value itself).
    case invalidArgument(String)
    /// The state string is not a state.
    case malformedState
    /// Changes cannot be calculated from that state (too old, from another store, or from the future):
    /// the client must resynchronize fully.
    case cannotCalculateChanges
    /// The database failed (unreachable, disk full, read-only, corrupt…).
    case storage(StorageFailure)
    /// The database was migrated by a newer build (it holds the named migration, which this build does not know).
    case schemaTooNew(String)
    /// The account already has a mailbox of that name.
    case mailboxExists
    /// The mailbox still holds messages, and they were not to be destroyed with it.
    case mailboxHasMessages
    /// A role mailbox (inbox, archive, trash) cannot be renamed or destroyed.
    case roleMailbox

    /// A description without any message content.
    public var description: String {
        switch self {
        case .notFound: return "not found"
        case .usernameTaken: return "username taken"
        case .tooManyDevices: return "too many devices"
        case .invalidArgument(let what): return "invalid \(what)"
        case .malformedState: return "malformed state"
        case .cannotCalculateChanges: return "cannot calculate changes"
        case .storage(let failure): return "storage error \(failure)"
        case .mailboxExists: return "a mailbox of that name exists"
        case .mailboxHasMessages: return "the mailbox holds messages"
        case .roleMailbox: return "a role mailbox cannot be renamed or destroyed"
        case .schemaTooNew(let migration):
            return "the database schema is newer than this build (it has migration \(migration)); upgrade mailboxd"
        }
    }
}
