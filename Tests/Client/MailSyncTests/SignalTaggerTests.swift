import MailSync
import OpenSSLCrypto
import Testing

/// Signals name states by tag under the device's key: the engine skips a signal whose tag is its own state's and
/// fetches for any other, without ever seeing the state the signal announces.
@Suite("Signal state tags in the sync machine")
struct SignalTaggerTests {
    static let key = SecureRandom.bytes(32)
    static let tagger = SignalTagger(key: key) { key, message in
        HMACSHA256.authenticationCode(for: message, key: key)
    }

    @Test func theTagIsTheContractsHMAC() throws {
        let state = "0123456789abcdef-42"
        let mac = HMACSHA256.authenticationCode(for: Array(state.utf8), key: Self.key)
        #expect(Self.tagger.tag(of: state) == String(Base64URL.encode(mac).prefix(16)))
        #expect(Self.tagger.tag(of: state).count == 16)
        #expect(Self.tagger.tag(of: state) != Self.tagger.tag(of: "0123456789abcdef-43"))
        let fromBase64 = try #require(
            SignalTagger(signalKey: Base64URL.encode(Self.key)) { HMACSHA256.authenticationCode(for: $1, key: $0) })
        #expect(fromBase64 == Self.tagger && fromBase64.tag(of: state) == Self.tagger.tag(of: state))
        #expect(SignalTagger(signalKey: "too-short") { _, _ in [] } == nil)
    }

    @Test func aSignalTaggedWithTheLocalStateIsSkippedAnyOtherFetches() {
        var machine = SyncStateMachine(localState: "e-5")
        machine.tagger = Self.tagger
        #expect(machine.trigger(.signal(state: Self.tagger.tag(of: "e-5"))) == .skip)
        #expect(machine.trigger(.signal(state: "e-5")) != .skip, "a bare state is not a tag")
        var other = SyncStateMachine(localState: "e-5")
        other.tagger = Self.tagger
        #expect(other.trigger(.signal(state: Self.tagger.tag(of: "e-6"))) == .startSync(.fetchChanges(since: "e-5")))
    }

    @Test func aFollowUpIsSkippedWhenTheRunReachedTheTaggedState() {
        var machine = SyncStateMachine(localState: "e-1")
        machine.tagger = Self.tagger
        _ = machine.trigger(.launch)
        #expect(machine.trigger(.signal(state: Self.tagger.tag(of: "e-3"))) == .joinedFollowUp)
        let reached = machine.changesApplied(newState: "e-3", hasMore: false, counts: ChangeCounts(created: 2))
        guard case .finish(_, let followUp) = reached else {
            Issue.record("expected finish, got \(reached)")
            return
        }
        #expect(followUp == nil, "the signal's state was reached by the running sync")

        _ = machine.trigger(.launch)
        _ = machine.trigger(.signal(state: Self.tagger.tag(of: "e-9")))
        let behind = machine.changesApplied(newState: "e-4", hasMore: false, counts: ChangeCounts(created: 1))
        guard case .finish(_, let again) = behind else {
            Issue.record("expected finish, got \(behind)")
            return
        }
        #expect(again == .fetchChanges(since: "e-4"), "a newer state was announced: one more run")
    }
}
