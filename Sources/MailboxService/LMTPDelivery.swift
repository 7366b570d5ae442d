import Foundation
import Locking
import MailIngest
import MailMIME
import MailboxHTTPAPI
import MailboxStore
import ServiceMetrics
import SignalDispatch

/// The mailbox behind the LMTP listener: RCPT looks the account up, DATA parses the message once and stores a
/// copy per recipient. The copies are handed to the store together from the session's thread, so they (and other
/// sessions' messages) share group commits; each reply waits for its own copy's commit.
struct LMTPDelivery: LMTPBackend {
    let store: MailboxStore
    let metrics: Metrics
    /// Addresses found to have an account in the last few seconds: an MTA names the same recipients again and
    /// again, and each lookup is a read and two thread hops. Accounts are not removed while mailboxd runs; were
    /// one, its delivery would still find no account and answer that recipient after DATA.
    let known = KnownRecipients(lifetime: 10)

    func checkRecipient(_ address: String) -> LMTPSession.RecipientCheck {
        if known.contains(address) { return .exists }
        let store = store
        let exists: Bool? = waitForTask { try? await store.recipientExists(address: address) }
        if exists == true { known.insert(address) }
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
        // Each copy goes to the store from this thread and the thread waits for their commits: no task, and on
        // SQLite no hop through the cooperative pool (the writer answers this thread directly).
        let outcomes = LockedValue(
            [(LMTPSession.DeliveryResult, Bool)](
                repeating: (.storageUnavailable, false), count: copies.count))
        let committed = DispatchGroup()
        for (index, copy) in copies.enumerated() {
            committed.enter()
            store.deliver(copy) { result in
                let outcome: (LMTPSession.DeliveryResult, Bool)
                switch result {
                case .success(let receipt): outcome = (.stored, receipt.duplicate)
                case .failure(MailboxStoreError.notFound): outcome = (.unknownRecipient, false)
                case .failure: outcome = (.storageUnavailable, false)
                }
                outcomes.withLock { $0[index] = outcome }
                committed.leave()
            }
        }
        committed.wait()
        let results = outcomes.withLock { $0 }
        for (recipient, (result, _)) in zip(envelope.recipients, results) where result == .unknownRecipient {
            known.remove(recipient)
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

/// Addresses known to have an account, each for `lifetime` seconds (monotonic time), at most 10,000 at once.
final class KnownRecipients: Sendable {
    private let lifetime: Double
    private let expiries = LockedValue([String: Double]())

    init(lifetime: Double) { self.lifetime = lifetime }

    private static var now: Double { ProcessInfo.processInfo.systemUptime }

    func contains(_ address: String) -> Bool {
        let key = address.lowercased()
        return expiries.withLock { ($0[key] ?? 0) > Self.now }
    }

    func insert(_ address: String) {
        let key = address.lowercased()
        let expiry = Self.now + lifetime
        expiries.withLock { entries in
            if entries.count >= 10_000 { entries.removeAll(keepingCapacity: true) }
            entries[key] = expiry
        }
    }

    func remove(_ address: String) {
        let key = address.lowercased()
        _ = expiries.withLock { $0.removeValue(forKey: key) }
    }
}
