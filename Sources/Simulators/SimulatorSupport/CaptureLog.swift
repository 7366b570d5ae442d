/// An entry of a simulator's capture log: numbered by the log, its outcome changed as the request's message
/// moves on (stored, delivered, expired, …).
public protocol CaptureLogEntry: Sendable {
    /// What became of the request.
    associatedtype Outcome: Sendable

    /// Position in the log, from 1 (assigned by ``CaptureLog/append(_:)``).
    var sequence: Int { get set }

    /// Records that the entry reached `outcome` at `timestamp` (milliseconds since 1970), and why.
    mutating func record(_ outcome: Outcome, at timestamp: Int64, detail: String?)
}

/// A simulator's capture log: a bounded list of entries addressed by sequence number, the oldest dropped first.
///
/// The entries sit in a ring: once full, a new entry takes the oldest one's slot, so appending costs the same at
/// capacity as before it (a list that dropped its first element would move every other one).
public struct CaptureLog<Entry: CaptureLogEntry>: Sendable {
    /// The most entries kept.
    public let capacity: Int
    @usableFromInline var ring: [Entry] = []
    /// The slot of the oldest entry once the ring is full (before that, entries lie in order from slot 0).
    @usableFromInline var oldestSlot = 0
    @usableFromInline var firstSequence = 1
    @usableFromInline var nextSequence = 1

    /// Creates an empty log keeping at most `capacity` entries.
    public init(capacity: Int) { self.capacity = max(1, capacity) }

    /// The slot of the entry `offset` places after the oldest.
    @inlinable func slot(_ offset: Int) -> Int { (oldestSlot + offset) % ring.count }

    /// Appends `entry` (its sequence is assigned) and returns the sequence number.
    @inlinable @discardableResult
    public mutating func append(_ entry: Entry) -> Int {
        var entry = entry
        entry.sequence = nextSequence
        nextSequence += 1
        if ring.count < capacity {
            ring.append(entry)
        } else {
            ring[oldestSlot] = entry
            oldestSlot = (oldestSlot + 1) % capacity
            firstSequence += 1
        }
        return entry.sequence
    }

    /// Records a new outcome for entry `sequence` (if it is still in the log).
    @inlinable
    public mutating func update(_ sequence: Int, _ outcome: Entry.Outcome, at timestamp: Int64, detail: String? = nil) {
        let offset = sequence - firstSequence
        guard offset >= 0, offset < ring.count else { return }
        ring[slot(offset)].record(outcome, at: timestamp, detail: detail)
    }

    /// Entries after sequence `after`, oldest first, at most `limit`.
    public func entries(after: Int, limit: Int) -> [Entry] {
        // Any `after` is taken, `Int.max` and negative numbers included.
        guard after < nextSequence - 1, limit > 0 else { return [] }
        let start = max(0, max(after, 0) + 1 - firstSequence)
        guard start < ring.count else { return [] }
        return (start..<min(ring.count, start + min(limit, ring.count))).map { ring[slot($0)] }
    }

    /// Forgets every entry; numbering goes on.
    public mutating func clear() {
        ring = []
        oldestSlot = 0
        firstSequence = nextSequence
    }
}
