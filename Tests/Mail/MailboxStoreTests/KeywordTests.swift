import Foundation
import MailboxStore
import Testing

/// A message's keywords beyond `seen` and `flagged` on both engines: added and removed inside the change's
/// transaction (so two clients' changes both stand), lowercased and checked, read by the listing IMAP selects with and
/// by a query; each change a modseq like any flag.
@Suite struct KeywordTests {
    @Test(arguments: StoreEngineKind.allCases) func keywordsAreAddedRemovedListedAndQueried(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        let first = try await f.deliver(to: "alice", subject: "one")
        let second = try await f.deliver(to: "alice", subject: "two")

        let answered = try await f.store.updateMessage(
            id: first.id, accountID: alice.id, addingKeywords: ["$Answered", "Work_Item"])
        #expect(answered.keywords == ["$answered", "work_item"])
        #expect(answered.modseq > first.state.modseq)
        // Another change adds to what is there, not to what the caller last read.
        let forwarded = try await f.store.updateMessage(
            id: first.id, accountID: alice.id, addingKeywords: ["$forwarded"], removingKeywords: ["work_item"])
        #expect(forwarded.keywords == ["$answered", "$forwarded"])
        // Nothing changed, no new modseq.
        let same = try await f.store.updateMessage(id: first.id, accountID: alice.id, addingKeywords: ["$ANSWERED"])
        #expect(same.modseq == forwarded.modseq)

        let listing = try await f.store.mailboxListing(accountID: alice.id, mailbox: .inbox)
        #expect(listing.entries.map(\.keywords) == [["$answered", "$forwarded"], []])
        let delta = try #require(
            try await f.store.mailboxDelta(accountID: alice.id, mailbox: .inbox, since: second.state.modseq))
        #expect(delta.entries.map(\.keywords) == [["$answered", "$forwarded"]])
        #expect(try await f.store.message(id: first.id, accountID: alice.id)?.keywords == ["$answered", "$forwarded"])

        let tagged = try await f.store.queryMessageIDs(accountID: alice.id, filter: .keyword("$Forwarded"))
        #expect(tagged.ids == [first.id])
        let untagged = try await f.store.queryMessageIDs(accountID: alice.id, filter: .noneOf([.keyword("$forwarded")]))
        #expect(untagged.ids == [second.id])
        // `_` in a keyword is itself, not LIKE's any-character.
        #expect(try await f.store.queryMessageIDs(accountID: alice.id, filter: .keyword("$forwarde_")).ids.isEmpty)

        for bad in ["", "two words", "paren(", "star*", "quote\"", "back\\slash", "$seen", "$Flagged", "ü"] {
            await #expect(throws: MailboxStoreError.invalidArgument("keyword")) {
                try await f.store.updateMessage(id: second.id, accountID: alice.id, addingKeywords: [bad])
            }
        }
        #expect(try await f.store.message(id: second.id, accountID: alice.id)?.keywords == [])

        // Filed with keywords (IMAP APPEND).
        var message = NewMessage(to: "alice", from: "alice@example.com", subject: "draft", body: "text")
        message.keywords = ["$Draft", "$draft"]
        let filed = try await f.store.deliver(message)
        #expect(try await f.store.message(id: filed.id, accountID: alice.id)?.keywords == ["$draft"])
    }
}
