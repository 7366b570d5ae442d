import Locking

/// What FETCH tells of a message that never changes: its size, INTERNALDATE, ENVELOPE and BODYSTRUCTURE, the last
/// two already written as IMAP. Making them means reading the message's bytes and its record from the store and
/// parsing its MIME structure; a summary lets a FETCH of only these items (what a client asks to list a mailbox)
/// skip all three.
struct IMAPMessageSummary: Sendable, Equatable {
    /// RFC822.SIZE.
    var size: Int
    /// INTERNALDATE, seconds since 1970.
    var receivedAt: Double
    /// The ENVELOPE's parenthesized list.
    var envelope: [UInt8]
    /// The BODYSTRUCTURE's (and BODY's) parenthesized list.
    var structure: [UInt8]

    init(content: IMAPMessageContent, parsed: IMAPMessagePart) {
        size = content.raw.count
        receivedAt = content.receivedAt
        envelope = IMAPResponse.envelope(content.envelope)
        structure = parsed.structure
    }

    /// About what an entry holds in memory, its key included.
    var cost: Int { envelope.count + structure.count + 96 }
}

/// The summaries of the messages FETCH read lately, shared by every connection of a server and bounded in bytes.
///
/// A message's bytes, envelope and arrival time never change once it is stored (its flags and mailbox do, and are
/// not kept here), and its id is never given to another message, so an entry needs no invalidation: a message that
/// is gone is simply not asked for again, and its entry ages out. Entries are keyed by account as well, so one
/// account's connection can never be answered from another's.
///
/// Two generations stand in for least-recently-used order: entries go into the current one; when it holds half the
/// budget it becomes the previous one and the one before is dropped; a hit in the previous generation moves the
/// entry back into the current one. What a client keeps listing stays; at most `budgetBytes` are held.
public final class IMAPFetchCache: Sendable {
    struct Key: Hashable {
        var account: Int64
        var id: String
    }

    private struct Generations {
        var current: [Key: IMAPMessageSummary] = [:]
        var currentBytes = 0
        var previous: [Key: IMAPMessageSummary] = [:]
    }

    /// The most bytes of summaries held (0: nothing is kept).
    public let budgetBytes: Int
    private let generations = LockedValue(Generations())

    /// A cache holding at most `budgetBytes` of summaries.
    public init(budgetBytes: Int) {
        self.budgetBytes = max(0, budgetBytes)
    }

    /// The summaries held of the account's messages `ids`.
    func summaries(account: Int64, ids: [String]) -> [String: IMAPMessageSummary] {
        guard budgetBytes > 0 else { return [:] }
        return generations.withLock { state in
            var found: [String: IMAPMessageSummary] = [:]
            for id in ids {
                let key = Key(account: account, id: id)
                if let summary = state.current[key] {
                    found[id] = summary
                } else if let summary = state.previous.removeValue(forKey: key) {
                    found[id] = summary
                    Self.add(key, summary, to: &state, budget: budgetBytes)
                }
            }
            return found
        }
    }

    /// Keeps `summaries` of the account's messages.
    func insert(account: Int64, _ summaries: [String: IMAPMessageSummary]) {
        guard budgetBytes > 0, !summaries.isEmpty else { return }
        generations.withLock { state in
            for (id, summary) in summaries {
                Self.add(Key(account: account, id: id), summary, to: &state, budget: budgetBytes)
            }
        }
    }

    /// The number of summaries held (both generations).
    var count: Int { generations.withLock { $0.current.count + $0.previous.count } }

    private static func add(
        _ key: Key, _ summary: IMAPMessageSummary, to state: inout Generations, budget: Int
    ) {
        guard summary.cost <= budget / 2 else { return }
        if state.currentBytes + summary.cost > budget / 2 {
            state.previous = state.current
            state.current = [:]
            state.currentBytes = 0
        }
        if let old = state.current.updateValue(summary, forKey: key) {
            state.currentBytes -= old.cost
        }
        state.currentBytes += summary.cost
    }
}
