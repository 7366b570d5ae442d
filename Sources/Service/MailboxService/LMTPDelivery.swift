import Durations
import Foundation
import Locking
import LoopEvents
import MailIngest
import MailMIME
import MailboxHTTPAPI
import MailboxStore
import ServiceMetrics
import SignalDispatch

/// The mailbox behind the LMTP listener: RCPT looks the account up, DATA parses the message once and stores a
/// copy per recipient. The copies are handed to the store together from the listener's thread, so they (and other
/// sessions' messages) share group commits; the replies go out as each message's copies are committed.
struct LMTPDelivery: LMTPBackend {
    let store: MailboxStore
    let metrics: Metrics
    /// Told of each message committed (the traces' arrivals).
    let feed: LoopFeed
    /// Addresses found to have an account in the last few seconds: an MTA names the same recipients again and
    /// again, and each lookup is a read. Accounts are not removed while mailboxd runs; were one, its delivery would
    /// still find no account and answer that recipient after DATA.
    let known = KnownRecipients(lifetime: 10)
    /// Messages larger than this are parsed on a thread of their own rather than on the listener's, which serves
    /// every session.
    static let parseInPlaceBytes = 1 << 20

    func checkRecipient(_ address: String, completion: @escaping @Sendable (LMTPSession.RecipientCheck) -> Void) {
        if known.contains(address) { return completion(.exists) }
        let (store, known) = (store, known)
        Task {
            let exists = try? await store.recipientExists(address: address)
            if exists == true { known.insert(address) }
            completion(exists.map { $0 ? .exists : .unknown } ?? .unavailable)
        }
    }

    func deliver(
        _ envelope: LMTPSession.Envelope, message: [UInt8],
        completion: @escaping @Sendable ([LMTPSession.DeliveryResult]) -> Void
    ) {
        guard message.count > Self.parseInPlaceBytes else {
            return store(Self.copies(of: message, for: envelope), for: envelope, completion: completion)
        }
        // Parsing a deeply nested message recurses: room for it.
        Thread.start(named: "lmtp-large", stackSize: 8 << 20) { [self] in
            store(Self.copies(of: message, for: envelope), for: envelope, completion: completion)
        }
    }

    /// The message parsed once; each recipient's copy differs only in its account.
    private static func copies(of message: [UInt8], for envelope: LMTPSession.Envelope) -> [NewMessage] {
        let parsed = MessageParts.ingested(message, recipient: "", envelopeSender: envelope.sender)
        return envelope.recipients.map { recipient in
            var copy = parsed
            copy.to = recipient
            return copy
        }
    }

    /// Hands each copy to the store (no task, and on SQLite no hop through the cooperative pool: the writer answers
    /// the completion directly) and answers once the last is committed.
    private func store(
        _ copies: [NewMessage], for envelope: LMTPSession.Envelope,
        completion: @escaping @Sendable ([LMTPSession.DeliveryResult]) -> Void
    ) {
        let progress = LockedValue(
            (
                outcomes: [(LMTPSession.DeliveryResult, Bool)](
                    repeating: (.storageUnavailable, false), count: copies.count),
                remaining: copies.count
            ))
        let startedAt = feed.isObserved ? store.currentTime : 0
        for (index, copy) in copies.enumerated() {
            store.deliver(copy) { [self] result in
                let outcome: (LMTPSession.DeliveryResult, Bool)
                switch result {
                case .success(let receipt):
                    outcome = (.stored, receipt.duplicate)
                    if !receipt.duplicate, feed.isObserved {
                        feed.arrived(
                            Arrival(
                                kind: .lmtp, accountID: receipt.accountID, modseq: receipt.state.modseq,
                                startedAt: startedAt, endedAt: store.currentTime))
                    }
                case .failure(MailboxStoreError.notFound): outcome = (.unknownRecipient, false)
                case .failure: outcome = (.storageUnavailable, false)
                }
                let finished = progress.withLock { progress -> [(LMTPSession.DeliveryResult, Bool)]? in
                    progress.outcomes[index] = outcome
                    progress.remaining -= 1
                    return progress.remaining == 0 ? progress.outcomes : nil
                }
                if let finished { completion(record(finished, for: envelope)) }
            }
        }
    }

    /// Counts the outcomes and forgets recipients whose account went away.
    private func record(
        _ outcomes: [(LMTPSession.DeliveryResult, Bool)], for envelope: LMTPSession.Envelope
    ) -> [LMTPSession.DeliveryResult] {
        for (recipient, (result, _)) in zip(envelope.recipients, outcomes) where result == .unknownRecipient {
            known.remove(recipient)
        }
        for (result, duplicate) in outcomes {
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
        return outcomes.map(\.0)
    }
}

/// Addresses known to have an account, each for `lifetime` seconds (monotonic time), at most 10,000 at once.
final class KnownRecipients: Sendable {
    private let lifetime: Double
    private let expiries = LockedValue([String: Double]())

    init(lifetime: Double) { self.lifetime = lifetime }

    private static var now: Double { Double(MonotonicTime.nanoseconds()) / 1e9 }

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
