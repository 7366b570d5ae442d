import Foundation
import MailboxStore
import Testing

/// IMAP's view of the store on both engines: per-mailbox UIDs that ascend, a UIDNEXT that moves only when a message
/// arrives, a MOVE that keeps flags and gives a new UID, UIDs that survive a restart, and UIDs allocated without a
/// collision when two instances deliver at once.
@Suite struct IMAPUIDTests {
    @Test(arguments: StoreEngineKind.allCases) func uidsAscendAndUIDNextMovesOnlyWhenAMessageArrives(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        let first = try await f.deliver(to: "alice", subject: "one")
        let second = try await f.deliver(to: "alice", subject: "two")
        let inbox = try await f.store.mailboxListing(accountID: alice.id, mailbox: .inbox)
        #expect(inbox.entries.map(\.id) == [first.id, second.id])
        #expect(inbox.entries[0].uid < inbox.entries[1].uid)
        #expect(inbox.uidNext > inbox.entries[1].uid)

        // A flag change moves the modseq, never the UIDs or UIDNEXT.
        try await f.store.updateMessage(id: first.id, accountID: alice.id, seen: true, flagged: true)
        let flagged = try await f.store.mailboxListing(accountID: alice.id, mailbox: .inbox)
        #expect(flagged.uidNext == inbox.uidNext)
        #expect(flagged.entries.map(\.uid) == inbox.entries.map(\.uid))
        #expect(flagged.entries[0].modseq > inbox.entries[0].modseq)
        let archiveBefore = try await f.store.mailboxListing(accountID: alice.id, mailbox: .archive)

        // MOVE keeps the flags and gives a UID above any the archive gave; the inbox's UIDNEXT stays.
        try await f.store.updateMessage(id: first.id, accountID: alice.id, mailbox: .archive)
        let archive = try await f.store.mailboxListing(accountID: alice.id, mailbox: .archive)
        let moved = try #require(archive.entries.first)
        #expect(moved.id == first.id && moved.seen && moved.flagged)
        #expect(moved.uid >= archiveBefore.uidNext)
        #expect(archive.uidNext > moved.uid)
        let inboxAfter = try await f.store.mailboxListing(accountID: alice.id, mailbox: .inbox)
        #expect(inboxAfter.entries.map(\.id) == [second.id])
        #expect(inboxAfter.uidNext == inbox.uidNext)
        #expect(inboxAfter.mailboxID != archive.mailboxID)

        // The next delivery's UID is at least the UIDNEXT announced before it.
        let third = try await f.deliver(to: "alice", subject: "three")
        let last = try await f.store.mailboxListing(accountID: alice.id, mailbox: .inbox)
        #expect(last.entries.last?.id == third.id)
        #expect((last.entries.last?.uid ?? 0) >= inboxAfter.uidNext)

        // A restart reads the same UIDs and mailbox ids (UIDVALIDITY is made from the id and the epoch).
        let reopened = try StoreFixture(reopening: f)
        let again = try await reopened.store.mailboxListing(accountID: alice.id, mailbox: .inbox)
        #expect(again.entries.map(\.uid) == last.entries.map(\.uid))
        #expect(again.mailboxID == last.mailboxID && again.uidNext == last.uidNext)
        #expect(reopened.store.epoch == f.store.epoch)
    }

    /// What IMAP's APPEND and COPY store: a message filed straight into another mailbox with its flags and arrival time,
    /// its UID given in the same transaction and the mailbox's UIDNEXT past it; the inbox untouched.
    @Test(arguments: StoreEngineKind.allCases) func aMessageFiledIntoAnotherMailboxKeepsItsFlagsAndDate(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        let inboxBefore = try await f.store.mailboxListing(accountID: alice.id, mailbox: .inbox)
        var message = NewMessage(to: "alice", from: "a@example.com", subject: "filed", body: "kept")
        (message.mailbox, message.seen, message.flagged, message.receivedAt) = (.archive, true, true, 1_700_000_000)
        let receipt = try await f.store.deliver(message)
        let archive = try await f.store.mailboxListing(accountID: alice.id, mailbox: .archive)
        let filed = try #require(archive.entries.first)
        #expect(archive.entries.count == 1 && filed.id == receipt.id && filed.seen && filed.flagged)
        #expect(filed.uid == receipt.state.modseq && archive.uidNext == filed.uid + 1)
        #expect(try await f.store.message(id: receipt.id, accountID: alice.id)?.receivedAt == 1_700_000_000)
        #expect(try await f.store.mailboxRowID(accountID: alice.id, mailbox: .archive) == archive.mailboxID)
        let inbox = try await f.store.mailboxListing(accountID: alice.id, mailbox: .inbox)
        #expect(inbox.entries.isEmpty && inbox.uidNext == inboxBefore.uidNext)
    }

    /// What a delta names as gone from a mailbox: what moved out of it or was destroyed since, and not what only changed
    /// in another mailbox (work for every reader of the delta, in proportion to the mailbox); a message moved in since
    /// is marked, one moved in earlier and only flagged since is not.
    @Test(arguments: StoreEngineKind.allCases) func aDeltaNamesWhatLeftAndNotWhatChangedElsewhere(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        let kept = try await f.deliver(to: "alice", subject: "kept")
        let filed = try await f.deliver(to: "alice", subject: "filed")
        let leaving = try await f.deliver(to: "alice", subject: "leaving")
        try await f.store.updateMessage(id: filed.id, accountID: alice.id, mailbox: .archive)
        let before = try await f.store.mailboxListing(accountID: alice.id, mailbox: .inbox).modseq

        // Flagged in the archive (it left the inbox before `before`), and one moved out of the inbox after it.
        try await f.store.updateMessage(id: filed.id, accountID: alice.id, flagged: true)
        try await f.store.updateMessage(id: leaving.id, accountID: alice.id, mailbox: .archive)
        let inbox = try #require(try await f.store.mailboxDelta(accountID: alice.id, mailbox: .inbox, since: before))
        #expect(inbox.left == [leaving.id])
        #expect(inbox.entries.isEmpty)
        let archive = try #require(
            try await f.store.mailboxDelta(accountID: alice.id, mailbox: .archive, since: before))
        #expect(Set(archive.entries.map(\.id)) == [filed.id, leaving.id])
        #expect(archive.movedIn == [leaving.id])

        // Destroyed: gone, whichever mailbox asks (the store keeps no mailbox for a destroyed message).
        let destroyedAt = try await f.store.mailboxListing(accountID: alice.id, mailbox: .inbox).modseq
        try await f.store.destroyMessage(id: kept.id, accountID: alice.id)
        let after = try #require(
            try await f.store.mailboxDelta(accountID: alice.id, mailbox: .inbox, since: destroyedAt))
        #expect(after.left == [kept.id])
    }

    @Test func twoInstancesDeliveringAtOnceGiveDistinctAscendingUIDs() async throws {
        let a = try StoreFixture(engine: .postgres, instanceID: "a")
        let b = try StoreFixture(reopening: a, instanceID: "b")
        let alice = try await a.account("alice")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for instance in [a, b] {
                group.addTask {
                    for i in 0..<25 { _ = try await instance.deliver(to: "alice", subject: "m\(i)") }
                }
            }
            try await group.waitForAll()
        }
        let listing = try await b.store.mailboxListing(accountID: alice.id, mailbox: .inbox)
        let uids = listing.entries.map(\.uid)
        #expect(uids.count == 50)
        #expect(Set(uids).count == 50, "no UID given twice")
        #expect(uids == uids.sorted())
        #expect(listing.uidNext == (uids.last ?? 0) + 1)
    }
}
