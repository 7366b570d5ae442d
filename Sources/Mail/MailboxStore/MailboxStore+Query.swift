import SQLSupport

/// Which of an account's messages a query selects: conditions combined as a tree (JMAP's `FilterOperator`).
public indirect enum MessageFilter: Sendable, Equatable {
    /// Every condition holds.
    case all([MessageFilter])
    /// At least one holds.
    case any([MessageFilter])
    /// None holds.
    case noneOf([MessageFilter])
    /// In this mailbox.
    case inMailbox(MailboxID)
    /// In none of these mailboxes.
    case notInMailboxes([MailboxID])
    /// The sender, subject or body contains the text (case-insensitively).
    case text(String)
    /// The sender contains the text.
    case from(String)
    /// A recipient (To or Cc, or the account's own address) contains the text.
    case to(String)
    /// The subject contains the text.
    case subject(String)
    /// The body contains the text.
    case body(String)
    /// Read (or not).
    case seen(Bool)
    /// Flagged (or not).
    case flagged(Bool)
    /// Has this keyword (beyond `$seen` and `$flagged`; any case).
    case keyword(String)
    /// Received before this time (seconds since 1970).
    case receivedBefore(Double)
    /// Received at or after this time.
    case receivedSince(Double)
    /// Has parts beyond its text and HTML bodies (or not).
    case hasAttachment(Bool)
    /// At least this many bytes.
    case minSize(Int)
    /// Fewer than this many bytes.
    case maxSize(Int)
}

/// What a query orders messages by; ties go to the older message.
public enum MessageOrder: String, Sendable, Equatable, CaseIterable {
    /// The time of delivery.
    case receivedAt
    /// The message's size.
    case size
    /// The subject, as stored.
    case subject
    /// The sender, as stored.
    case from
}

/// One page of a message query, with the state it was read at.
public struct MessageQueryPage: Sendable, Equatable {
    /// The message ids, in order, from the page's first position.
    public var ids: [String]
    /// How many messages the filter selects, when asked for.
    public var total: Int?
    /// The account's state when the query ran.
    public var state: SyncState
}

/// An account's change counters as JMAP's per-type states need them.
public struct ChangeCounters: Sendable, Equatable {
    /// The account's modseq: the last change of any kind.
    public var modseq: Int64
    /// The modseq after which the set of messages last changed (a delivery or a destruction), never lower than the
    /// horizon: what a thread-level state is made from.
    public var membershipModseq: Int64
    /// The modseq of the last delivery, never lower than the horizon.
    public var deliveryModseq: Int64
}

extension MailboxStore {
    /// The ids of the account's messages the filter selects, ordered, from `offset`, at most `limit` of them
    /// (`nil`: all), with the total when `countTotal`.
    public func queryMessageIDs(
        accountID: Int64, filter: MessageFilter?, order: MessageOrder = .receivedAt, ascending: Bool = false,
        offset: Int = 0, limit: Int? = nil, countTotal: Bool = false
    ) async throws -> MessageQueryPage {
        var arguments: [any SQLBindable] = [accountID]
        let condition = filter.map { Self.sql(for: $0, arguments: &arguments) } ?? "1 = 1"
        let column =
            switch order {
            case .receivedAt: "m.received_at"
            case .size: "m.size"
            case .subject: "m.subject"
            case .from: "m.from_addr"
            }
        let direction = ascending ? "ASC" : "DESC"
        let from = """
            FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id WHERE m.account_id = ? AND (\(condition))
            """
        let pageArguments = arguments + [limit ?? Int.max >> 1, max(0, offset)]
        let countArguments = arguments
        return try await read { db in
            let modseq = try Self.modseq(accountID: accountID, in: db)
            let ids = try db.query(
                "SELECT m.public_id \(from) ORDER BY \(column) \(direction), m.id \(direction) LIMIT ? OFFSET ?",
                arguments: pageArguments
            ).map { try $0.string("public_id") }
            let total =
                countTotal
                ? try db.query("SELECT count(*) AS n \(from)", arguments: countArguments).first?.int("n") : nil
            return MessageQueryPage(ids: ids, total: total, state: self.state(modseq))
        }
    }

    /// The condition for `filter`, its values appended to `arguments` in order. Text conditions are
    /// case-insensitive substring matches (`%` and `_` in the text match themselves).
    static func sql(for filter: MessageFilter, arguments: inout [any SQLBindable]) -> String {
        func combined(_ filters: [MessageFilter], _ joiner: String, empty: String) -> String {
            guard !filters.isEmpty else { return empty }
            return "(" + filters.map { sql(for: $0, arguments: &arguments) }.joined(separator: " \(joiner) ") + ")"
        }
        func contains(_ columns: [String], _ text: String) -> String {
            let escaped = text.lowercased().replacingOccurrences(of: "\\", with: "\\\\")
                .replacingOccurrences(of: "%", with: "\\%").replacingOccurrences(of: "_", with: "\\_")
            return "("
                + columns.map { column in
                    arguments.append("%" + escaped + "%")
                    return "lower(\(column)) LIKE ? ESCAPE '\\'"
                }.joined(separator: " OR ") + ")"
        }
        switch filter {
        case .all(let filters): return combined(filters, "AND", empty: "1 = 1")
        case .any(let filters): return combined(filters, "OR", empty: "1 = 0")
        case .noneOf(let filters): return "NOT " + combined(filters, "OR", empty: "(1 = 0)")
        case .inMailbox(let mailbox):
            arguments.append(mailbox.rawValue)
            return "b.public_id = ?"
        case .notInMailboxes(let mailboxes):
            guard !mailboxes.isEmpty else { return "1 = 1" }
            arguments.append(contentsOf: mailboxes.map(\.rawValue) as [any SQLBindable])
            return "b.public_id NOT IN (" + mailboxes.map { _ in "?" }.joined(separator: ", ") + ")"
        case .text(let text): return contains(["m.from_addr", "m.subject", "m.body"], text)
        case .from(let text): return contains(["m.from_addr"], text)
        case .to(let text): return contains(["m.to_addr", "m.to_json", "m.cc_json"], text)
        case .subject(let text): return contains(["m.subject"], text)
        case .body(let text): return contains(["m.body"], text)
        case .keyword(let keyword):
            // The column holds keywords with one space between; none holds a space, `%` or `\`.
            let escaped = keyword.lowercased().replacingOccurrences(of: "_", with: "\\_")
            arguments.append("% " + escaped + " %")
            return "(' ' || m.keywords || ' ') LIKE ? ESCAPE '\\'"
        case .seen(let seen):
            arguments.append(seen)
            return "m.seen = ?"
        case .flagged(let flagged):
            arguments.append(flagged)
            return "m.flagged = ?"
        case .receivedBefore(let time):
            arguments.append(time)
            return "m.received_at < ?"
        case .receivedSince(let time):
            arguments.append(time)
            return "m.received_at >= ?"
        case .hasAttachment(let has):
            return has
                ? "(m.attachments_json IS NOT NULL AND m.attachments_json <> '[]')"
                : "(m.attachments_json IS NULL OR m.attachments_json = '[]')"
        case .minSize(let size):
            arguments.append(size)
            return "m.size >= ?"
        case .maxSize(let size):
            arguments.append(size)
            return "m.size < ?"
        }
    }

    /// The account's messages with these ids (the others are not the account's or do not exist), in no order.
    public func messages(ids: [String], accountID: Int64) async throws -> [MessageRecord] {
        guard !ids.isEmpty else { return [] }
        return try await read { db in try Self.messages(ids: ids, accountID: accountID, in: db) }
    }

    /// The account's state, its messages with these ids and, when `sources`, where each one's RFC 5322 form comes
    /// from: in one read transaction (one trip to the store, and the state the records were read at).
    public func messages(ids: [String], accountID: Int64, sources: Bool) async throws -> MessageRead {
        try await read { db in
            let modseq = try Self.modseq(accountID: accountID, in: db)
            let records = try Self.messages(ids: ids, accountID: accountID, in: db)
            return MessageRead(
                state: self.state(modseq), records: records,
                sources: sources ? try Self.messageSources(ids: records.map(\.id), accountID: accountID, in: db) : [:])
        }
    }

    static func messages(ids: [String], accountID: Int64, in db: any SQLConnection) throws -> [MessageRecord] {
        guard !ids.isEmpty else { return [] }
        let placeholders = ids.map { _ in "?" }.joined(separator: ", ")
        let arguments: [any SQLBindable] = [accountID] + ids
        // `+` keeps the account's index out of the plan: the ids' unique index finds each row in one step, where a
        // walk over the account's messages grows with the mailbox.
        return try db.query(
            """
            SELECT \(Self.messageColumns), m.html_body FROM messages m JOIN mailboxes b ON b.id = m.mailbox_id
            WHERE +m.account_id = ? AND m.public_id IN (\(placeholders))
            """, arguments: arguments
        ).map { row in
            var record = try Self.message(from: row)
            record.htmlBody = row["html_body"].string
            return record
        }
    }

    /// The account's change counters (see ``ChangeCounters``).
    public func changeCounters(accountID: Int64) async throws -> ChangeCounters {
        try await read { db in
            guard let account = try db.queryOne("SELECT modseq, horizon_modseq FROM accounts WHERE id = ?", accountID)
            else { throw MailboxStoreError.notFound }
            let horizon = try account.int64("horizon_modseq")
            // The last delivery's modseq: one step down `messages_by_created`, however large the mailbox.
            let created =
                try db.scalar("SELECT max(created_modseq) FROM messages WHERE account_id = ?", accountID).int64 ?? 0
            let destroyed =
                try db.scalar("SELECT max(modseq) FROM tombstones WHERE account_id = ?", accountID).int64 ?? 0
            return ChangeCounters(
                modseq: try account.int64("modseq"), membershipModseq: max(created, destroyed, horizon),
                deliveryModseq: max(created, horizon))
        }
    }
}
