import Locking
import MailIngest
import MailMIME
import MailboxHTTPAPI
import MailboxStore
import ServiceMetrics
import SignalDispatch

/// The mailbox behind the LMTP listener: RCPT looks the account up, DATA parses the message once and stores a
/// copy per recipient. The copies are written concurrently, so they (and other sessions' messages) share group
/// commits; each reply waits for its own copy's commit.
struct LMTPDelivery: LMTPBackend {
    let store: MailboxStore
    let metrics: Metrics

    func checkRecipient(_ address: String) -> LMTPSession.RecipientCheck {
        let store = store
        let exists: Bool? = waitForTask { try? await store.recipientExists(address: address) }
        return exists.map { $0 ? .exists : .unknown } ?? .unavailable
    }

    func deliver(_ envelope: LMTPSession.Envelope, message: [UInt8]) -> [LMTPSession.DeliveryResult] {
        // Parsed once; each recipient's copy differs only in its account.
        let parsed = MessageParts.ingested(message, recipient: "", envelopeSender: envelope.sender)
        let copies = envelope.recipients.map { recipient in
            var copy = parsed
            copy.to = recipient
            return copy
        }
        let store = store
        let results = waitForTask {
            await withTaskGroup(of: (Int, LMTPSession.DeliveryResult, Bool).self) { group in
                for (index, copy) in copies.enumerated() {
                    group.addTask {
                        do {
                            let receipt = try await store.deliver(copy)
                            return (index, .stored, receipt.duplicate)
                        } catch MailboxStoreError.notFound {
                            return (index, .unknownRecipient, false)
                        } catch {
                            return (index, .storageUnavailable, false)
                        }
                    }
                }
                var results = [(LMTPSession.DeliveryResult, Bool)](
                    repeating: (.storageUnavailable, false), count: copies.count)
                for await (index, result, duplicate) in group { results[index] = (result, duplicate) }
                return results
            }
        }
        for (result, duplicate) in results {
            let label: String
            switch result {
            case .stored: label = duplicate ? "duplicate" : "stored"
            case .unknownRecipient: label = "unknownRecipient"
            case .storageUnavailable: label = "storageUnavailable"
            }
            metrics.increment(
                "mailboxd_lmtp_deliveries_total", labels: "result=\"\(label)\"",
                help: "Recipient copies of LMTP messages, by outcome.")
        }
        return results.map(\.0)
    }
}
