import JSONText
import MailboxStore

/// Mailbox/get, /changes, /query and /set (RFC 8621 §2) over the store's three mailboxes, one per role. Their ids
/// are the role names; they cannot be created, renamed or destroyed, which /set answers with `forbidden`.
extension MethodContext {
    static let mailboxProperties: Set<String> = [
        "id", "name", "parentId", "role", "sortOrder", "totalEmails", "unreadEmails", "totalThreads",
        "unreadThreads", "myRights", "isSubscribed",
    ]
    static let mailboxCountProperties: [String] = ["totalEmails", "unreadEmails", "totalThreads", "unreadThreads"]

    static func sortOrder(_ role: MailboxRole) -> Int {
        switch role {
        case .inbox: 1
        case .archive: 2
        case .trash: 3
        }
    }

    static func mailboxObject(_ mailbox: MailboxSummary, properties: [String]?) -> JSONValue {
        let all: [String: JSONValue] = [
            "id": .string(mailbox.id), "name": .string(mailbox.name), "parentId": .null,
            "role": .string(mailbox.role.rawValue), "sortOrder": .int(sortOrder(mailbox.role)),
            "totalEmails": .int(mailbox.total), "unreadEmails": .int(mailbox.unread),
            // Every email is a thread of its own here (see Thread/get).
            "totalThreads": .int(mailbox.total), "unreadThreads": .int(mailbox.unread),
            "myRights": [
                "mayReadItems": true, "mayAddItems": true, "mayRemoveItems": true, "maySetSeen": true,
                "maySetKeywords": true, "mayCreateChild": false, "mayRename": false, "mayDelete": false,
                "maySubmit": false,
            ],
            "isSubscribed": true,
        ]
        guard let properties else { return .object(all) }
        var selected: [String: JSONValue] = ["id": .string(mailbox.id)]
        for property in properties { selected[property] = all[property] }
        return .object(selected)
    }

    func mailboxGet(_ arguments: Arguments) async throws -> JSONValue {
        let ids = try getIDs(arguments)
        let properties = try properties(arguments) { Self.mailboxProperties.contains($0) }
        // The state is read first: a change between the two reads is then seen again, never missed.
        let state = try await storeCall { try await store.currentState(accountID: account.id) }
        let mailboxes = try await storeCall { try await store.mailboxes(accountID: account.id) }
        let wanted = ids ?? mailboxes.map(\.id)
        let byID = Dictionary(mailboxes.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        return [
            "accountId": .string(account.jmapID), "state": .string(self.state(state.modseq)),
            "list": .array(wanted.compactMap { byID[$0].map { Self.mailboxObject($0, properties: properties) } }),
            "notFound": .strings(wanted.filter { byID[$0] == nil }),
        ]
    }

    func mailboxChanges(_ arguments: Arguments) async throws -> JSONValue {
        let since = try sinceModseq(arguments)
        _ = try maxChanges(arguments)
        let current = try await storeCall { try await store.currentState(accountID: account.id) }
        guard since.modseq <= current.modseq else {
            throw MethodError("cannotCalculateChanges", "That state is newer than the account's.")
        }
        // Mailboxes are never created or destroyed; any change since the state may have changed their counts.
        let changed = since.modseq < current.modseq
        return [
            "accountId": .string(account.jmapID), "oldState": .string(state(since.modseq)),
            "newState": .string(state(current.modseq)), "hasMoreChanges": false, "created": [],
            "updated": .strings(changed ? MailboxRole.allCases.map(\.rawValue) : []), "destroyed": [],
            "updatedProperties": changed ? .strings(Self.mailboxCountProperties) : .null,
        ]
    }

    func mailboxQuery(_ arguments: Arguments) async throws -> JSONValue {
        let filter = try arguments.object("filter") ?? [:]
        for key in filter.keys where !["role", "hasAnyRole", "name", "parentId", "isSubscribed"].contains(key) {
            throw MethodError("unsupportedFilter", "Mailbox/query cannot filter on '\(key)'.")
        }
        var ascending = true
        var byName = false
        if let sort = arguments["sort"] {
            guard let comparators = sort.array else { throw MethodError.invalidArguments("'sort' must be an array.") }
            for comparator in comparators.prefix(1) {
                guard let property = comparator["property"]?.string, ["name", "sortOrder"].contains(property) else {
                    throw MethodError("unsupportedSort", "Mailbox/query sorts by 'name' or 'sortOrder'.")
                }
                byName = property == "name"
                ascending = comparator["isAscending"]?.bool ?? true
            }
        }
        let state = try await storeCall { try await store.currentState(accountID: account.id) }
        var mailboxes = try await storeCall { try await store.mailboxes(accountID: account.id) }
        if let role = filter["role"] {
            mailboxes = mailboxes.filter { role.isNull ? false : $0.role.rawValue == role.string }
        }
        if let hasRole = filter["hasAnyRole"]?.bool { mailboxes = mailboxes.filter { _ in hasRole } }
        if let name = filter["name"]?.string?.lowercased() {
            mailboxes = mailboxes.filter { $0.name.lowercased().contains(name) }
        }
        if let parent = filter["parentId"], !parent.isNull { mailboxes = [] }
        if let subscribed = filter["isSubscribed"]?.bool, !subscribed { mailboxes = [] }
        mailboxes.sort {
            let before =
                byName ? $0.name.lowercased() < $1.name.lowercased() : Self.sortOrder($0.role) < Self.sortOrder($1.role)
            return ascending ? before : !before
        }
        let ids = mailboxes.map(\.id)
        let window = try QueryWindow(arguments, total: ids.count, anchorIndex: { ids.firstIndex(of: $0) })
        var result: [String: JSONValue] = [
            "accountId": .string(account.jmapID), "queryState": .string(self.state(state.modseq)),
            "canCalculateChanges": false, "position": .int(window.position),
            "ids": .strings(Array(ids[window.range])),
        ]
        if try arguments.bool("calculateTotal", default: false) { result["total"] = .int(ids.count) }
        return .object(result)
    }

    func mailboxSet(_ arguments: Arguments) async throws -> JSONValue {
        let (create, update, destroy) = try setCounts(arguments)
        let state = try await storeCall { try await store.currentState(accountID: account.id) }
        let current = self.state(state.modseq)
        try checkIfInState(arguments, current: current)
        let refused = "This server's mailboxes are fixed: one per role, not created, changed or destroyed."
        return [
            "accountId": .string(account.jmapID), "oldState": .string(current), "newState": .string(current),
            "created": .null, "updated": .null, "destroyed": .null,
            "notCreated": create.isEmpty
                ? .null : .object(create.mapValues { _ in Self.setError("forbidden", refused) }),
            "notUpdated": update.isEmpty
                ? .null : .object(update.mapValues { _ in Self.setError("forbidden", refused) }),
            "notDestroyed": destroy.isEmpty
                ? .null : .object(Dictionary(destroy.map { ($0, Self.setError("forbidden", refused)) }) { a, _ in a }),
        ]
    }

    // MARK: Threads

    /// Each email is its own thread: `T` and the email's id. The store keeps Message-ID and In-Reply-To but does
    /// not group by them, so a conversation's emails are threads of one.
    static func threadID(_ emailID: String) -> String { "T" + emailID }

    func threadGet(_ arguments: Arguments) async throws -> JSONValue {
        guard let ids = try getIDs(arguments) else {
            throw MethodError("requestTooLarge", "Thread/get needs 'ids': every thread is one email here.")
        }
        let counters = try await storeCall { try await store.changeCounters(accountID: account.id) }
        let emailIDs = ids.compactMap { $0.hasPrefix("T") ? String($0.dropFirst()) : nil }
        let found = Set(
            try await storeCall { try await store.messages(ids: emailIDs, accountID: account.id) }.map(\.id))
        var list: [JSONValue] = []
        var notFound: [String] = []
        for id in ids {
            let email = String(id.dropFirst())
            if id.hasPrefix("T"), found.contains(email) {
                list.append(["id": .string(id), "emailIds": [.string(email)]])
            } else {
                notFound.append(id)
            }
        }
        return [
            "accountId": .string(account.jmapID), "state": .string(state(counters.membershipModseq)),
            "list": .array(list), "notFound": .strings(notFound),
        ]
    }

    func threadChanges(_ arguments: Arguments) async throws -> JSONValue {
        let since = try sinceModseq(arguments)
        let limit = try maxChanges(arguments)
        let counters = try await storeCall { try await store.changeCounters(accountID: account.id) }
        let changes = try await storeCall {
            try await store.changes(accountID: account.id, since: since, maxChanges: limit)
        }
        // A thread changes when its email arrives or goes; a flag or a move is no change to the thread.
        let newState = changes.hasMore ? changes.newState.modseq : max(counters.membershipModseq, since.modseq)
        return [
            "accountId": .string(account.jmapID), "oldState": .string(state(since.modseq)),
            "newState": .string(state(newState)), "hasMoreChanges": .bool(changes.hasMore),
            "created": .strings(changes.created.map { Self.threadID($0.id) }), "updated": [],
            "destroyed": .strings(changes.destroyed.map(Self.threadID)),
        ]
    }
}

/// The slice of a query's results a client asked for (RFC 8620 §5.5): `position` (negative counts from the end)
/// or `anchor` with `anchorOffset`, then `limit`.
struct QueryWindow {
    var position: Int
    var range: Range<Int>

    init(_ arguments: Arguments, total: Int, anchorIndex: (String) -> Int?) throws {
        let limit = try arguments.int("limit", in: 0...Int64(Int32.max))
        var start: Int
        if let anchor = try arguments.string("anchor") {
            guard let index = anchorIndex(anchor) else { throw MethodError("anchorNotFound") }
            let offset = try arguments.int("anchorOffset", in: Int64(Int32.min)...Int64(Int32.max)) ?? 0
            start = max(0, index + offset)
        } else {
            let position = try arguments.int("position", in: Int64(Int32.min)...Int64(Int32.max)) ?? 0
            start = position < 0 ? max(0, total + position) : position
        }
        start = min(start, total)
        let end = limit.map { min(total, start + $0) } ?? total
        position = start
        range = start..<end
    }
}
