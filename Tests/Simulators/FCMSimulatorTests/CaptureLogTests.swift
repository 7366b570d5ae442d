import SimulatorSupport
import Testing

/// The simulators' shared capture log, with a small entry type of its own.
@Suite struct CaptureLogTests {
    struct Entry: CaptureLogEntry, Equatable {
        var sequence = 0
        var name: String
        var outcomes: [String] = []

        mutating func record(_ outcome: String, at timestamp: Int64, detail: String?) { outcomes.append(outcome) }
    }

    @Test func theOldestEntriesGoFirstAndSequencesKeepCounting() {
        var log = CaptureLog<Entry>(capacity: 3)
        for name in ["a", "b", "c", "d", "e"] { log.append(Entry(name: name)) }
        #expect(log.entries(after: 0, limit: .max).map(\.name) == ["c", "d", "e"])
        #expect(log.entries(after: 0, limit: .max).map(\.sequence) == [3, 4, 5])
        #expect(log.entries(after: 3, limit: .max).map(\.name) == ["d", "e"])
        #expect(log.entries(after: 2, limit: 1).map(\.name) == ["c"])
        #expect(log.entries(after: 5, limit: .max).isEmpty)
        #expect(log.entries(after: 0, limit: 0).isEmpty)
        #expect(log.entries(after: .max, limit: .max).isEmpty)
        #expect(log.entries(after: .min, limit: 1).map(\.name) == ["c"])
    }

    @Test func anUpdateReachesItsEntryUntilTheEntryIsDropped() {
        var log = CaptureLog<Entry>(capacity: 2)
        let first = log.append(Entry(name: "a"))
        log.update(first, "stored", at: 1)
        let second = log.append(Entry(name: "b"))
        log.append(Entry(name: "c"))
        log.update(first, "delivered", at: 2)
        log.update(second, "delivered", at: 2)
        #expect(log.entries(after: 0, limit: .max).map(\.outcomes) == [["delivered"], []])
    }

    @Test func clearingForgetsEntriesButNotTheNumbering() {
        var log = CaptureLog<Entry>(capacity: 2)
        for name in ["a", "b", "c"] { log.append(Entry(name: name)) }
        log.clear()
        #expect(log.entries(after: 0, limit: .max).isEmpty)
        #expect(log.append(Entry(name: "d")) == 4)
        log.append(Entry(name: "e"))
        log.append(Entry(name: "f"))
        #expect(log.entries(after: 0, limit: .max).map(\.name) == ["e", "f"])
    }
}
