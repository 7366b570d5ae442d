import Foundation
import IMAP
import MailSync

/// MailSync over IMAP: what a mail app on a phone does after a content-free signal. Each sync opens the mailboxes
/// with QRESYNC (RFC 7162), naming the UIDVALIDITY and HIGHESTMODSEQ it saved and the UIDs it knows, and applies
/// what the server answers: VANISHED UIDs are destroyed, changed messages fetched. Messages keep the server's ids
/// (RFC 8474 `EMAILID`), so the cache is the same whichever way it was filled; a message moved between mailboxes is
/// one update. The state is `imap:` and each mailbox's `NAME=UIDVALIDITY.HIGHESTMODSEQ`.
///
/// The map from UIDs to ids lives in memory: a process that starts with a saved state it has no map for answers
/// `cannotCalculateChanges`, and the engine lists everything again. Blocking socket work runs on a queue of its own,
/// off the cooperative pool.
public final class IMAPMailTransport: MailTransport, @unchecked Sendable {  // state confined to `queue`
    /// Where the IMAP server is and who logs in.
    public struct Configuration: Sendable {
        /// The server's host name (as its certificate names it) or address.
        public var host: String
        /// Its IMAPS port.
        public var port: UInt16
        /// The CA file that signed its certificate.
        public var caFile: String
        /// The account's username.
        public var username: String
        /// The account's password.
        public var password: String

        /// Creates a configuration.
        public init(host: String, port: UInt16, caFile: String, username: String, password: String) {
            self.host = host
            self.port = port
            self.caFile = caFile
            self.username = username
            self.password = password
        }
    }

    static let mailboxes: [(name: String, mailbox: MailboxID)] = [
        ("INBOX", .inbox), ("Archive", .archive), ("Trash", .trash),
    ]
    static let items = "(UID FLAGS EMAILID ENVELOPE RFC822.SIZE INTERNALDATE)"

    private let configuration: Configuration
    private let queue = DispatchQueue(label: "mailsync-imap")
    private var connection: IMAPClientConnection?
    /// Each mailbox's UIDs and the ids they hold, as of the last sync.
    private var known: [String: [UInt32: String]] = [:]
    /// The mailbox now selected.
    private var selected: String?

    /// A transport for `configuration`; it connects on first use.
    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    private func onQueue<T: Sendable>(_ work: @escaping @Sendable () throws(MailSyncError) -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                do {
                    continuation.resume(returning: try work())
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    /// The connection, made (and logged in) when there is none; a failed command drops it for the next call.
    private func client() throws(MailSyncError) -> IMAPClientConnection {
        if let connection { return connection }
        let fresh = try IMAPClientConnection(
            host: configuration.host, port: configuration.port, caFile: configuration.caFile,
            username: configuration.username, password: configuration.password)
        connection = fresh
        selected = nil
        return fresh
    }

    private func withClient<T>(_ body: (IMAPClientConnection) throws(MailSyncError) -> T) throws(MailSyncError) -> T {
        do {
            return try body(try client())
        } catch {
            if case .network = error { connection = nil }
            throw error
        }
    }

    // MARK: MailTransport

    /// Every message of every mailbox, in one page: a SELECT and a `UID FETCH 1:*` per mailbox.
    public func fetchAllMessages(cursor: String?, limit: Int) async throws -> MessagePage {
        try await onQueue { [self] () throws(MailSyncError) -> MessagePage in
            try withClient { (client) throws(MailSyncError) -> MessagePage in
                var messages: [MailMessage] = []
                var states: [String] = []
                known = [:]
                for (name, mailbox) in Self.mailboxes {
                    let opened = try client.run("SELECT \(name)")
                    selected = name
                    let status = Self.mailboxStatus(opened.untagged)
                    let listing = try client.run("UID FETCH 1:* \(Self.items)")
                    var uids: [UInt32: String] = [:]
                    for message in Self.messages(in: listing.untagged, mailbox: mailbox) {
                        uids[message.uid] = message.message.id
                        messages.append(message.message)
                    }
                    known[name] = uids
                    states.append("\(name)=\(status.uidValidity).\(status.highestModseq)")
                }
                return MessagePage(messages: messages, state: "imap:" + states.joined(separator: ";"), nextCursor: nil)
            }
        }
    }

    /// What changed since `state`, in one round trip when only new messages arrived: for every mailbox a QRESYNC
    /// SELECT and a `UID FETCH` of the UIDs past the last one known, all pipelined in one write. Known messages whose
    /// flags changed (the SELECT's `FETCH` lines name them) are fetched in a second round trip, only when there are
    /// any.
    public func fetchChanges(since state: String, max: Int) async throws -> MessageChanges {
        try await onQueue { [self] () throws(MailSyncError) -> MessageChanges in
            guard let saved = Self.parse(state) else { throw .cannotCalculateChanges }
            guard Self.mailboxes.allSatisfy({ known[$0.name] != nil }) else { throw .cannotCalculateChanges }
            return try withClient { (client) throws(MailSyncError) -> MessageChanges in
                var commands: [String] = []
                var firstNew: [String: UInt32] = [:]
                for (name, _) in Self.mailboxes {
                    guard let (validity, modseq) = saved[name] else { throw .cannotCalculateChanges }
                    let uids = known[name] ?? [:]
                    let knownSet = uids.isEmpty ? "" : " " + IMAPSequenceSet.write(Array(uids.keys))
                    let next = (uids.keys.max() ?? 0) + 1
                    firstNew[name] = next
                    commands.append("SELECT \(name) (QRESYNC (\(validity) \(modseq)\(knownSet)))")
                    commands.append("UID FETCH \(next):* \(Self.items)")
                }
                let answers = try client.pipeline(commands)
                try checkSelected(answers, last: Self.mailboxes.last?.name)
                // What this sync learns of the UIDs, kept only once all of it succeeded: a sync that fails halfway
                // is run again from the saved state, and must find the UIDs it did not finish with.
                var learned = known
                var changes = Changes()
                var refetch: [(name: String, mailbox: MailboxID, uids: [UInt32])] = []
                for (index, (name, mailbox)) in Self.mailboxes.enumerated() {
                    let opened = answers[2 * index].untagged
                    let status = Self.mailboxStatus(opened)
                    guard let (validity, _) = saved[name], status.uidValidity == validity else {
                        throw .cannotCalculateChanges
                    }
                    var uids = learned[name] ?? [:]
                    for uid in Self.vanished(in: opened, known: Array(uids.keys)) {
                        if let id = uids.removeValue(forKey: uid) { changes.destroyed.append(id) }
                    }
                    let next = firstNew[name] ?? 1
                    // `next:*` names the last message when none is past `next`: only UIDs from `next` on are new.
                    for message in Self.messages(in: answers[2 * index + 1].untagged, mailbox: mailbox)
                    where message.uid >= next {
                        changes.created.append(message.message)
                        uids[message.uid] = message.message.id
                    }
                    let flagged = Self.fetchedUIDs(in: opened).filter { $0 < next && uids[$0] != nil }
                    if !flagged.isEmpty { refetch.append((name, mailbox, flagged)) }
                    learned[name] = uids
                    changes.states.append("\(name)=\(status.uidValidity).\(status.highestModseq)")
                }
                if !refetch.isEmpty {
                    let again = try client.pipeline(
                        refetch.flatMap {
                            ["SELECT \($0.name)", "UID FETCH \(IMAPSequenceSet.write($0.uids)) \(Self.items)"]
                        }
                    )
                    try checkSelected(again, last: refetch.last?.name)
                    for (index, entry) in refetch.enumerated() {
                        changes.updated += Self.messages(in: again[2 * index + 1].untagged, mailbox: entry.mailbox)
                            .map(\.message)
                    }
                }
                known = learned
                return changes.result(since: state)
            }
        }
    }

    /// Throws for the first answer that is not OK, after noting what is selected: the mailbox of the last SELECT when
    /// all went well, none otherwise (a server deselects as a SELECT begins, so a failed one leaves nothing selected).
    private func checkSelected(_ answers: [IMAPClientConnection.Answer], last: String?) throws(MailSyncError) {
        selected = nil
        for answer in answers {
            let status = IMAPClientConnection.status(of: answer.tagged)
            guard status == "OK" else { throw .server(status: 0, code: "imap:\(status)", retryAfter: nil) }
        }
        selected = last
    }

    /// A sync's findings, gathered mailbox by mailbox.
    struct Changes {
        var created: [MailMessage] = []
        var updated: [MailMessage] = []
        var destroyed: [String] = []
        var states: [String] = []

        /// The changes, a move (gone from one mailbox, new in another) made one update of the same id.
        func result(since state: String) -> MessageChanges {
            var (created, updated, destroyed) = (created, updated, destroyed)
            let moved = Set(destroyed).intersection(created.map(\.id))
            destroyed.removeAll { moved.contains($0) }
            updated += created.filter { moved.contains($0.id) }
            created.removeAll { moved.contains($0.id) }
            return MessageChanges(
                oldState: state, newState: "imap:" + states.joined(separator: ";"), hasMore: false,
                created: created, updated: updated, destroyed: destroyed)
        }
    }

    /// One message with its text (`BODY.PEEK[TEXT]`, as sent).
    public func fetchMessage(id: String) async throws -> MailMessage {
        try await onQueue { [self] () throws(MailSyncError) -> MailMessage in
            try withClient { (client) throws(MailSyncError) -> MailMessage in
                let (name, mailbox, uid) = try locate(id)
                try select(name, on: client)
                let fetched = try client.run(
                    "UID FETCH \(uid) (UID FLAGS EMAILID ENVELOPE RFC822.SIZE INTERNALDATE BODY.PEEK[TEXT])")
                guard let found = Self.messages(in: fetched.untagged, mailbox: mailbox).first else { throw .notFound }
                return found.message
            }
        }
    }

    /// Sets flags (`UID STORE`) and moves (`UID MOVE`); answers the message as it is afterwards.
    public func updateMessage(id: String, _ update: MessageUpdate) async throws -> MailMessage {
        try await onQueue { [self] () throws(MailSyncError) -> MailMessage in
            try withClient { (client) throws(MailSyncError) -> MailMessage in
                let (name, mailbox, uid) = try locate(id)
                try select(name, on: client)
                for (flag, value) in [("\\Seen", update.seen), ("\\Flagged", update.flagged)] {
                    guard let value else { continue }
                    _ = try client.run("UID STORE \(uid) \(value ? "+" : "-")FLAGS.SILENT (\(flag))")
                }
                var target = (name, mailbox, uid)
                if let destination = update.mailbox, destination != mailbox,
                    let entry = Self.mailboxes.first(where: { $0.mailbox == destination })
                {
                    _ = try client.run("UID MOVE \(uid) \(entry.name)")
                    known[name]?[uid] = nil
                    try select(entry.name, on: client)
                    let found = try client.run("UID FETCH 1:* (UID EMAILID)")
                    guard
                        let moved = Self.messages(in: found.untagged, mailbox: destination, idsOnly: true)
                            .first(where: { $0.message.id == id })
                    else { throw .notFound }
                    target = (entry.name, destination, moved.uid)
                }
                let fetched = try client.run("UID FETCH \(target.2) \(Self.items)")
                guard let message = Self.messages(in: fetched.untagged, mailbox: target.1).first else {
                    throw .notFound
                }
                return message.message
            }
        }
    }

    /// Destroys a message: the `Deleted` flag, then `UID EXPUNGE`.
    public func deleteMessage(id: String) async throws {
        try await onQueue { [self] () throws(MailSyncError) in
            try withClient { (client) throws(MailSyncError) in
                let (name, _, uid) = try locate(id)
                try select(name, on: client)
                _ = try client.run("UID STORE \(uid) +FLAGS.SILENT (\\Deleted)")
                _ = try client.run("UID EXPUNGE \(uid)")
                known[name]?[uid] = nil
            }
        }
    }

    /// Logs out (the next call connects again).
    public func close() async {
        _ = try? await onQueue { [self] () throws(MailSyncError) in
            connection?.logout()
            connection = nil
        }
    }

    private func locate(_ id: String) throws(MailSyncError) -> (String, MailboxID, UInt32) {
        for (name, mailbox) in Self.mailboxes {
            if let uid = known[name]?.first(where: { $0.value == id })?.key { return (name, mailbox, uid) }
        }
        throw .notFound
    }

    private func select(_ name: String, on client: IMAPClientConnection) throws(MailSyncError) {
        guard selected != name else { return }
        _ = try client.run("SELECT \(name)")
        selected = name
    }

    // MARK: Reading responses

    /// `imap:NAME=UV.MODSEQ;…` as a map; `nil` when it is not one.
    static func parse(_ state: String) -> [String: (UInt32, UInt64)]? {
        guard state.hasPrefix("imap:") else { return nil }
        var result: [String: (UInt32, UInt64)] = [:]
        for entry in state.dropFirst(5).split(separator: ";") {
            let halves = entry.split(separator: "=")
            guard halves.count == 2 else { return nil }
            let numbers = halves[1].split(separator: ".")
            guard numbers.count == 2, let validity = UInt32(numbers[0]), let modseq = UInt64(numbers[1]) else {
                return nil
            }
            result[String(halves[0])] = (validity, modseq)
        }
        return result
    }

    /// UIDVALIDITY and HIGHESTMODSEQ from a SELECT's untagged `OK [CODE value]` responses.
    static func mailboxStatus(_ responses: [[UInt8]]) -> (uidValidity: UInt32, highestModseq: UInt64) {
        var validity: UInt32 = 0
        var modseq: UInt64 = 0
        for line in responses {
            let text = String(decoding: line, as: UTF8.self)
            guard text.hasPrefix("* OK ["), let close = text.firstIndex(of: "]") else { continue }
            let code = text[text.index(text.startIndex, offsetBy: 6)..<close].split(separator: " ")
            guard code.count == 2 else { continue }
            if code[0].uppercased() == "UIDVALIDITY" { validity = UInt32(code[1]) ?? 0 }
            if code[0].uppercased() == "HIGHESTMODSEQ" { modseq = UInt64(code[1]) ?? 0 }
        }
        return (validity, modseq)
    }

    /// The UIDs among `known` that `* VANISHED` responses name.
    static func vanished(in responses: [[UInt8]], known: some Collection<UInt32>) -> [UInt32] {
        let sets = responses.compactMap { line -> IMAPSequenceSet? in
            guard let response = try? IMAPCommand.parse(line), response.name == "VANISHED" else { return nil }
            return response.arguments.last?.text.flatMap(IMAPSequenceSet.init)
        }
        guard !sets.isEmpty else { return [] }
        return known.filter { uid in sets.contains { $0.contains(uid, largest: .max) } }
    }

    /// The UIDs of the `FETCH` responses among `responses`.
    static func fetchedUIDs(in responses: [[UInt8]]) -> [UInt32] {
        responses.compactMap { line in
            guard let response = try? IMAPCommand.parse(line), response.arguments.first?.text?.uppercased() == "FETCH",
                case .list(let items) = response.arguments.last ?? .list([])
            else { return nil }
            return value(of: "UID", in: items)?.text.flatMap { UInt32($0) }
        }
    }

    static func value(of name: String, in items: [IMAPToken]) -> IMAPToken? {
        var index = 0
        while index + 1 < items.count {
            if items[index].text?.uppercased() == name { return items[index + 1] }
            index += 2
        }
        return nil
    }

    /// The messages of `FETCH` responses (those with an EMAILID), with their UIDs.
    static func messages(
        in responses: [[UInt8]], mailbox: MailboxID, idsOnly: Bool = false
    ) -> [(uid: UInt32, message: MailMessage)] {
        responses.compactMap { line in
            guard let response = try? IMAPCommand.parse(line), response.arguments.first?.text?.uppercased() == "FETCH",
                case .list(let items) = response.arguments.last ?? .list([]),
                let uid = value(of: "UID", in: items)?.text.flatMap({ UInt32($0) }),
                case .list(let ids) = value(of: "EMAILID", in: items) ?? .list([]), let id = ids.first?.text
            else { return nil }
            if idsOnly {
                return (
                    uid, MailMessage(id: id, mailbox: mailbox, from: "", to: [], subject: "", size: 0, receivedAt: 0)
                )
            }
            var flags: [String] = []
            if case .list(let list) = value(of: "FLAGS", in: items) {
                flags = list.compactMap { $0.text?.lowercased() }
            }
            var envelope: [IMAPToken] = []
            if case .list(let list) = value(of: "ENVELOPE", in: items) { envelope = list }
            func text(_ index: Int) -> String? {
                guard index < envelope.count, let value = envelope[index].text, value != "NIL" else { return nil }
                if case .atom = envelope[index] { return nil }
                return value
            }
            func addresses(_ index: Int) -> [MailAddress] {
                guard index < envelope.count, case .list(let list) = envelope[index] else { return [] }
                return list.compactMap { entry in
                    guard case .list(let parts) = entry, parts.count == 4 else { return nil }
                    func part(_ n: Int) -> String? {
                        if case .string = parts[n] { return parts[n].text }
                        return nil
                    }
                    let address = [part(2), part(3)].compactMap { $0 }.joined(separator: "@")
                    return MailAddress(name: part(0) ?? "", address: address)
                }
            }
            let sender = addresses(2).first
            let from = sender.map { $0.name.isEmpty ? $0.address : "\($0.name) <\($0.address)>" } ?? ""
            let received = value(of: "INTERNALDATE", in: items)?.text.flatMap(Self.internalDate) ?? 0
            var message = MailMessage(
                id: id, mailbox: mailbox, from: from, to: addresses(5), cc: addresses(6), subject: text(1) ?? "",
                size: value(of: "RFC822.SIZE", in: items)?.text.flatMap { Int($0) } ?? 0, receivedAt: received,
                seen: flags.contains("\\seen"), flagged: flags.contains("\\flagged"),
                messageId: text(9).map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "<>")) },
                inReplyTo: text(8).map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "<>")) },
                sentAt: text(0).flatMap(Self.envelopeDate))
            if let body = value(of: "BODY[TEXT]", in: items)?.text { message.body = body }
            return (uid, message)
        }
    }

    static func internalDate(_ text: String) -> Double? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "dd-MMM-yyyy HH:mm:ss Z"
        return formatter.date(from: text.trimmingCharacters(in: .whitespaces))?.timeIntervalSince1970
    }

    static func envelopeDate(_ text: String) -> Double? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss Z"
        return formatter.date(from: text)?.timeIntervalSince1970
    }
}
