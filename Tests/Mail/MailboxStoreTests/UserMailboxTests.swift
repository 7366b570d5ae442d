import Foundation
import SQLiteKit
import TestSupport
import Testing

@testable import MailboxStore

/// The user's own mailboxes on both engines: made, filled, renamed with what is below them and destroyed, each a
/// change of the account's state that the other doors read (the messages' mailbox, the change log, Mailbox/changes'
/// tombstones); the role mailboxes kept as they are; and a database from before them upgraded with its mail intact.
@Suite struct UserMailboxTests {
    @Test(arguments: StoreEngineKind.allCases) func aMailboxIsMadeFilledRenamedAndDestroyed(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        let bob = try await f.account("bob")
        let before = try await f.store.currentState(accountID: alice.id)

        let work = try await f.store.createMailbox(accountID: alice.id, name: "Work")
        #expect(work.role == nil && work.name == "Work" && work.createdModseq > before.modseq)
        #expect(![MailboxID.inbox, .archive, .trash].contains(work.id))
        let made = try await f.store.currentState(accountID: alice.id)
        #expect(made.modseq == work.createdModseq)
        let listed = try await f.store.mailboxes(accountID: alice.id)
        #expect(listed.map(\.id) == [.inbox, .archive, .trash, work.id])
        #expect(try await f.store.mailboxes(accountID: bob.id).count == 3)
        #expect(try await f.store.mailboxID(accountID: alice.id, named: "Work") == work.id)
        #expect(try await f.store.mailboxID(accountID: bob.id, named: "Work") == nil)

        // Names: one of each per account, INBOX the inbox's in any case, no empty level, no control character.
        await #expect(throws: MailboxStoreError.mailboxExists) {
            try await f.store.createMailbox(accountID: alice.id, name: "Work")
        }
        await #expect(throws: MailboxStoreError.mailboxExists) {
            try await f.store.createMailbox(accountID: alice.id, name: "Archive")
        }
        for bad in ["", "inbox", "INBOX", "a//b", "/a", "a/", "tab\there", String(repeating: "x", count: 256)] {
            await #expect(throws: MailboxStoreError.invalidArgument("mailbox name")) {
                try await f.store.createMailbox(accountID: alice.id, name: bad)
            }
        }
        // Another account may use the same name.
        try await f.store.createMailbox(accountID: bob.id, name: "Work")

        // A message moved in: its mailbox on every door, a UID of the mailbox's, the listing filtered by it.
        let delivered = try await f.deliver(to: "alice", subject: "filed")
        let moved = try await f.store.updateMessage(id: delivered.id, accountID: alice.id, mailbox: work.id)
        #expect(moved.mailbox == work.id)
        let listing = try await f.store.mailboxListing(accountID: alice.id, mailbox: work.id)
        #expect(listing.entries.map(\.id) == [delivered.id] && listing.uidNext > listing.entries[0].uid)
        let page = try await f.store.listMessages(accountID: alice.id, mailbox: work.id)
        #expect(page.messages.map(\.id) == [delivered.id])
        #expect(try await f.store.mailboxes(accountID: alice.id).last?.total == 1)
        // A mailbox the account does not have (another account's included) moves nothing.
        let bobsWork = try #require(try await f.store.mailboxID(accountID: bob.id, named: "Work"))
        await #expect(throws: MailboxStoreError.invalidArgument("mailbox")) {
            try await f.store.updateMessage(id: delivered.id, accountID: alice.id, mailbox: bobsWork)
        }
        #expect(try await f.store.message(id: delivered.id, accountID: alice.id)?.mailbox == work.id)

        // RENAME takes what is below along; the ids stay.
        let year = try await f.store.createMailbox(accountID: alice.id, name: "Work/2026")
        let other = try await f.store.createMailbox(accountID: alice.id, name: "Workshop")
        try await f.store.renameMailbox(accountID: alice.id, id: work.id, to: "Jobs")
        var names = Dictionary(
            uniqueKeysWithValues: try await f.store.mailboxes(accountID: alice.id).map { ($0.id, $0.name) })
        #expect(names[work.id] == "Jobs" && names[year.id] == "Jobs/2026" && names[other.id] == "Workshop")
        // Into its own hierarchy too: `Jobs` → `Jobs/Old` makes `Jobs/2026` `Jobs/Old/2026`.
        try await f.store.renameMailbox(accountID: alice.id, id: work.id, to: "Jobs/Old")
        names = Dictionary(
            uniqueKeysWithValues: try await f.store.mailboxes(accountID: alice.id).map { ($0.id, $0.name) })
        #expect(names[work.id] == "Jobs/Old" && names[year.id] == "Jobs/Old/2026")
        await #expect(throws: MailboxStoreError.mailboxExists) {
            try await f.store.renameMailbox(accountID: alice.id, id: other.id, to: "Jobs/Old")
        }
        await #expect(throws: MailboxStoreError.roleMailbox) {
            try await f.store.renameMailbox(accountID: alice.id, id: .archive, to: "Kept")
        }
        await #expect(throws: MailboxStoreError.notFound) {
            try await f.store.renameMailbox(accountID: alice.id, id: bobsWork, to: "Mine")
        }

        // DELETE: kept while it holds mail unless its mail goes too; then the mail's tombstones and the mailbox's.
        let beforeDestroy = try await f.store.currentState(accountID: alice.id)
        await #expect(throws: MailboxStoreError.mailboxHasMessages) {
            try await f.store.destroyMailbox(accountID: alice.id, id: work.id, removingMessages: false)
        }
        await #expect(throws: MailboxStoreError.roleMailbox) {
            try await f.store.destroyMailbox(accountID: alice.id, id: .trash, removingMessages: true)
        }
        try await f.store.destroyMailbox(accountID: alice.id, id: work.id, removingMessages: true)
        let changes = try await f.store.changes(accountID: alice.id, since: beforeDestroy)
        #expect(changes.destroyed == [delivered.id])
        #expect(try await f.store.destroyedMailboxes(accountID: alice.id, since: beforeDestroy.modseq) == [work.id])
        #expect(try await f.store.destroyedMailboxes(accountID: alice.id, since: changes.newState.modseq).isEmpty)
        #expect(
            try await f.store.mailboxes(accountID: alice.id).map(\.id) == [.inbox, .archive, .trash, year.id, other.id])
        await #expect(throws: MailboxStoreError.notFound) {
            try await f.store.mailboxListing(accountID: alice.id, mailbox: work.id)
        }
        // An empty one goes without asking.
        try await f.store.destroyMailbox(accountID: alice.id, id: other.id, removingMessages: false)
        #expect(try await f.store.mailboxes(accountID: alice.id).count == 4)
    }

    /// A message filed straight into a mailbox of the user's (IMAP APPEND): there, with a UID of that mailbox's.
    @Test(arguments: StoreEngineKind.allCases) func aDeliveryCanBeFiledIntoAMailboxOfTheUsers(
        engine: StoreEngineKind
    ) async throws {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        let sent = try await f.store.createMailbox(accountID: alice.id, name: "Sent")
        var message = NewMessage(to: "alice", from: "alice@example.com", subject: "out", body: "text")
        (message.mailbox, message.seen) = (sent.id, true)
        let receipt = try await f.store.deliver(message)
        let listing = try await f.store.mailboxListing(accountID: alice.id, mailbox: sent.id)
        #expect(listing.entries.map(\.id) == [receipt.id] && listing.entries[0].seen)
        #expect(try await f.store.mailboxListing(accountID: alice.id, mailbox: .inbox).entries.isEmpty)
    }

    /// A SQLite database made before the user's mailboxes (its schema at 015, with mail in it): opened by this build,
    /// it is upgraded in place with every message in its mailbox, each mailbox under the id it had, and takes new
    /// mailboxes at once.
    @Test func aDatabaseFromBeforeIsUpgradedWithItsMailKept() async throws {
        let directory = try TemporaryDirectory(prefix: "usermailboxes")
        let path = directory.path("old.sqlite")
        do {
            let db = try Database(path: path)
            var migrator = Migrator()
            for migration in MailboxStore.migrations where migration.name < "016" {
                migrator.register(migration.name) { try $0.execute(migration.sqlite) }
            }
            try migrator.migrate(db)
            try db.execute(
                """
                INSERT INTO accounts (id, username, password_hash, created_at, modseq) VALUES (7, 'old', 'x', 0, 2);
                INSERT INTO mailboxes (id, account_id, role, name, uid_next) VALUES
                    (70, 7, 'inbox', 'Inbox', 2), (71, 7, 'archive', 'Archive', 3), (72, 7, 'trash', 'Trash', 1);
                INSERT INTO messages (public_id, account_id, mailbox_id, from_addr, to_addr, subject, preview, body,
                                      size, received_at, created_modseq, modseq, uid)
                VALUES ('m1', 7, 70, 'a@example.com', 'old', 'one', '', '', 0, 0, 1, 1, 1),
                       ('m2', 7, 71, 'a@example.com', 'old', 'two', '', '', 0, 0, 2, 2, 2);
                """)
        }
        let store = try MailboxStore(path: path)
        #expect(try await store.appliedMigrations().contains("016-user-mailboxes"))
        let mailboxes = try await store.mailboxes(accountID: 7)
        #expect(mailboxes.map(\.id) == [.inbox, .archive, .trash])
        #expect(mailboxes.map(\.role) == [.inbox, .archive, .trash])
        #expect(mailboxes.map(\.total) == [1, 1, 0])
        #expect(try await store.message(id: "m2", accountID: 7)?.mailbox == .archive)
        #expect(try await store.mailboxListing(accountID: 7, mailbox: .archive).uidNext == 3)
        let made = try await store.createMailbox(accountID: 7, name: "Later")
        try await store.updateMessage(id: "m1", accountID: 7, mailbox: made.id)
        #expect(try await store.mailboxListing(accountID: 7, mailbox: made.id).entries.map(\.id) == ["m1"])
    }
}
