import JSONText
import Testing

@testable import MailboxStore

/// The store's JSON array columns read back what their writers wrote, whatever the text holds.
@Suite struct JSONColumnTests {
    @Test func addressesAndAttachmentsReadBackAsWritten() {
        let addresses = [
            MailAddress(name: "", address: "a@example.com"),
            MailAddress(name: "Zoë \"Q\" Ünver\\日本 👍🏽\n", address: "zoe+tag@example.org"),
        ]
        let attachments = [
            MailAttachment(partId: "2", filename: "report \"final\".pdf", type: "application/pdf", size: 123_456),
            MailAttachment(partId: "3.1", filename: nil, type: "image/png", size: 0),
        ]
        let addressColumn = "[" + addresses.map(\.json).joined(separator: ",") + "]"
        let attachmentColumn = "[" + attachments.map(\.json).joined(separator: ",") + "]"
        #expect(MailboxStore.decodeList(addressColumn) == addresses)
        #expect(MailboxStore.decodeList(attachmentColumn) == attachments)
    }

    @Test func anEmptyOrUnreadableColumnIsNoElements() {
        let none: [MailAddress] = MailboxStore.decodeList(nil)
        let empty: [MailAddress] = MailboxStore.decodeList("[]")
        let broken: [MailAddress] = MailboxStore.decodeList("[{\"name\":")
        #expect(none.isEmpty && empty.isEmpty && broken.isEmpty)
        // An element of another shape is left out; the others are kept.
        let mixed: [MailAddress] = MailboxStore.decodeList(
            #"[{"name":"A","address":"a@example.com"},{"address":7},"x"]"#)
        #expect(mixed == [MailAddress(name: "A", address: "a@example.com")])
    }
}
