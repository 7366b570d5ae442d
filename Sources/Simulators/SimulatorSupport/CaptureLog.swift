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
public struct CaptureLog<Entry: CaptureLogEntry>: Sendable {
    /// The most entries kept.
    public let capacity: Int
    private var entries: [Entry] = []
    private var firstSequence = 1
    private var nextSequence = 1

    /// Creates an empty log keeping at most `capacity` entries.
    public init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Appends `entry` (its sequence is assigned) and returns the sequence number.
    @discardableResult
    public mutating func append(_ entry: Entry) -> Int {
        var entry = entry
        entry.sequence = nextSequence
        nextSequence += 1
        entries.append(entry)
        if entries.count > capacity {
            let excess = entries.count - capacity
            entries.removeFirst(excess)
            firstSequence += excess
        }
        return entry.sequence
    }

    /// Records a new outcome for entry `sequence` (if it is still in the log).
    public mutating func update(_ sequence: Int, _ outcome: Entry.Outcome, at timestamp: Int64, detail: String? = nil) {
        let index = sequence - firstSequence
        guard index >= 0, index < entries.count else { return }
        entries[index].record(outcome, at: timestamp, detail: detail)
    }

    /// Entries after sequence `after`, oldest first, at most `limit`.
    public func entries(after: Int, limit: Int) -> [Entry] {
        let start = max(0, after + 1 - firstSequence)
        guard start < entries.count else { return [] }
        return Array(entries[start...].prefix(max(0, limit)))
    }

    /// Forgets every entry; numbering goes on.
    public mutating func clear() {
        entries = []
        firstSequence = nextSequence
    }
}
