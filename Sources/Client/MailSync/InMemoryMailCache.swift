import Foundation

/// A ``MailCacheStore`` kept in memory: for tests, previews and apps that do not persist mail.
///
/// `@unchecked Sendable`: `lock` guards `messagesByID` and `currentState`.
public final class InMemoryMailCache: MailCacheStore, @unchecked Sendable {
    private let lock = NSLock()
    private var messagesByID: [String: MailMessage] = [:]
    private var currentState: String?

    /// Creates an empty cache, optionally holding `messages` at `state`.
    public init(messages: [MailMessage] = [], state: String? = nil) {
        for message in messages { messagesByID[message.id] = message }
        currentState = state
    }

    /// See ``MailCacheStore/state()``.
    public func state() throws -> String? { lock.withLock { currentState } }

    /// See ``MailCacheStore/apply(_:)``.
    @discardableResult
    public func apply(_ changes: MessageChanges) throws -> ChangeCounts {
        lock.withLock {
            var counts = ChangeCounts()
            for message in changes.created + changes.updated {
                let previous = messagesByID[message.id]
                messagesByID[message.id] = message.keepingBody(of: previous)
                if previous == nil { counts.created += 1 } else { counts.updated += 1 }
            }
            for id in changes.destroyed where messagesByID.removeValue(forKey: id) != nil {
                counts.destroyed += 1
            }
            currentState = changes.newState
            return counts
        }
    }

    /// See ``MailCacheStore/replaceAll(with:state:)``.
    @discardableResult
    public func replaceAll(with messages: [MailMessage], state: String) throws -> ChangeCounts {
        lock.withLock {
            var counts = ChangeCounts()
            var next: [String: MailMessage] = [:]
            for message in messages {
                let previous = messagesByID[message.id]
                let merged = message.keepingBody(of: previous)
                next[message.id] = merged
                if previous == nil {
                    counts.created += 1
                } else if previous != merged {
                    counts.updated += 1
                }
            }
            counts.destroyed = messagesByID.keys.filter { next[$0] == nil }.count
            messagesByID = next
            currentState = state
            return counts
        }
    }

    /// See ``MailCacheStore/messages(in:)``.
    public func messages(in mailbox: MailboxID?) throws -> [MailMessage] {
        lock.withLock {
            messagesByID.values.filter { mailbox == nil || $0.mailbox == mailbox }
                .sorted { ($0.receivedAt, $0.id) > ($1.receivedAt, $1.id) }
        }
    }

    /// See ``MailCacheStore/message(id:)``.
    public func message(id: String) throws -> MailMessage? { lock.withLock { messagesByID[id] } }

    /// See ``MailCacheStore/messageCount()``.
    public func messageCount() throws -> Int { lock.withLock { messagesByID.count } }

    /// See ``MailCacheStore/storeBody(_:forMessageID:)``.
    public func storeBody(_ body: String, forMessageID id: String) throws {
        lock.withLock { messagesByID[id]?.body = body }
    }

    /// See ``MailCacheStore/upsert(_:)``.
    public func upsert(_ message: MailMessage) throws {
        lock.withLock { messagesByID[message.id] = message.keepingBody(of: messagesByID[message.id]) }
    }

    /// See ``MailCacheStore/remove(messageID:)``.
    public func remove(messageID id: String) throws {
        _ = lock.withLock { messagesByID.removeValue(forKey: id) }
    }
}
