import Foundation
import MailboxStore
import Push
import Testing

@Suite struct IsolationTests {
    /// Every read and write API, tried with another account's ids, returns nothing and changes nothing.
    @Test(arguments: StoreEngineKind.allCases) func anotherAccountsIdsReachNothing(engine: StoreEngineKind) async throws
    {
        let f = try StoreFixture(engine: engine)
        let alice = try await f.account("alice")
        let mallory = try await f.account("mallory")
        let message = try await f.deliver(to: "alice", subject: "private").id
        let device = try await f.store.registerDevice(
            address: .apns(StoreFixture.token(9), topic: "com.example.mail", environment: .sandbox),
            accountID: alice.id,
            sessionID: nil)
        let session = try await f.store.createSession(
            accountID: alice.id, tokenHash: [UInt8](repeating: 1, count: 32), deviceName: "phone")
        let aliceState = try await f.store.currentState(accountID: alice.id)

        #expect(try await f.store.message(id: message, accountID: mallory.id) == nil)
        #expect(try await f.store.listMessages(accountID: mallory.id).messages.isEmpty)
        #expect(try await f.store.mailboxes(accountID: mallory.id).allSatisfy { $0.total == 0 })
        #expect(try await f.store.unreadCount(accountID: mallory.id) == 0)
        #expect(try await f.store.devices(accountID: mallory.id).isEmpty)
        let malloryChanges = try await f.store.changes(
            accountID: mallory.id, since: SyncState(epoch: f.store.epoch, modseq: 0))
        #expect(malloryChanges.created.isEmpty)
        await #expect(throws: MailboxStoreError.notFound) {
            try await f.store.updateMessage(id: message, accountID: mallory.id, seen: true)
        }
        await #expect(throws: MailboxStoreError.notFound) {
            try await f.store.updateMessage(id: message, accountID: mallory.id, mailbox: .trash)
        }
        await #expect(throws: MailboxStoreError.notFound) {
            try await f.store.destroyMessage(id: message, accountID: mallory.id)
        }
        #expect(try await f.store.deleteDevice(handle: device.address.token, accountID: mallory.id) == false)
        #expect(try await f.store.revokeSession(id: session.id, accountID: mallory.id) == false)

        // Nothing of Alice's changed.
        #expect(try await f.store.currentState(accountID: alice.id) == aliceState)
        let kept = try #require(try await f.store.message(id: message, accountID: alice.id))
        #expect(!kept.seen && kept.mailbox == .inbox)
        #expect(try await f.store.devices(accountID: alice.id).count == 1)
        #expect(try await f.store.session(tokenHash: [UInt8](repeating: 1, count: 32)) != nil)
    }
}
