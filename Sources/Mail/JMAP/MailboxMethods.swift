import JSONText
import MailboxStore

/// Mailbox/get, /changes, /query and /set (RFC 8621 §2) over the store's mailboxes: one per role, whose ids are the
/// role names and which cannot be renamed or destroyed (`forbidden`), and the user's own, which /set creates, renames
/// and destroys. Mailboxes are not nested here (`parentId` is always null): a name may hold `/`, which IMAP shows as
/// its hierarchy.
extension MethodContext {
    static let mailboxProperties: Set<String> = [
        "id", "name", "parentId", "role", "sortOrder", "totalEmails", "unreadEmails", "totalThreads",
        "unreadThreads", "myRights", "isSubscribed",
    ]
    static let mailboxCountProperties: [String] = ["totalEmails", "unreadEmails", "totalThreads", "unreadThreads"]

    /// The role mailboxes first, in a fixed order, then the user's.
    static func sortOrder(_ role: MailboxRole?) -> Int {
        switch role {
        case .inbox: 1
        case .archive: 2
        case .trash: 3
        case nil: 10
        }
    }

    static func mailboxObject(_ mailbox: MailboxSummary, properties: [String]?) -> JSONValue {
        let own = mailbox.role == nil
        let all: [String: JSONValue] = [
            "id": .string(mailbox.id.rawValue), "name": .string(mailbox.name), "parentId": .null,
            "role": mailbox.role.map { .string($0.rawValue) } ?? .null, "sortOrder": .int(sortOrder(mailbox.role)),
            "totalEmails": .int(mailbox.total), "unreadEmails": .int(mailbox.unread),
            // Every email is a thread of its own here (see Thread/get).
            "totalThreads": .int(mailbox.total), "unreadThreads": .int(mailbox.unread),
            "myRights": [
                "mayReadItems": true, "mayAddItems": true, "mayRemoveItems": true, "maySetSeen": true,
                "maySetKeywords": true, "mayCreateChild": false, "mayRename": .bool(own), "mayDelete": .bool(own),
                "maySubmit": false,
            ],
            "isSubscribed": true,
        ]
        guard let properties else { return .object(all) }
        var selected: [String: JSONValue] = ["id": .string(mailbox.id.rawValue)]
        for property in properties { selected[property] = all[property] }
        return .object(selected)
    }

    func mailboxGet(_ arguments: Arguments) async throws -> JSONValue {
        let ids = try getIDs(arguments)
        let properties = try properties(arguments) { Self.mailboxProperties.contains($0) }
        // The state is read first: a change between the two reads is then seen again, never missed.
        let state = try await storeCall { try await store.currentState(accountID: account.id) }
        let mailboxes = try await storeCall { try await store.mailboxes(accountID: account.id) }
        let wanted = ids ?? mailboxes.map(\.id.rawValue)
        let byID = Dictionary(mailboxes.map { ($0.id.rawValue, $0) }, uniquingKeysWith: { first, _ in first })
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
        let mailboxes = try await storeCall { try await store.mailboxes(accountID: account.id) }
        let destroyed = try await storeCall {
            try await store.destroyedMailboxes(accountID: account.id, since: since.modseq)
        }
        let created = mailboxes.filter { $0.createdModseq > since.modseq }
        // Any change since the state may have changed the others' counts (or a name): each is reported updated.
        let changed = since.modseq < current.modseq
        let updated = changed ? mailboxes.filter { $0.createdModseq <= since.modseq } : []
        return [
            "accountId": .string(account.jmapID), "oldState": .string(state(since.modseq)),
            "newState": .string(state(current.modseq)), "hasMoreChanges": false,
            "created": .strings(created.map(\.id.rawValue)), "updated": .strings(updated.map(\.id.rawValue)),
            "destroyed": .strings(destroyed.map(\.rawValue)), "updatedProperties": .null,
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
            mailboxes = mailboxes.filter { role.isNull ? $0.role == nil : $0.role?.rawValue == role.string }
        }
        if let hasRole = filter["hasAnyRole"]?.bool { mailboxes = mailboxes.filter { ($0.role != nil) == hasRole } }
        if let name = filter["name"]?.string?.lowercased() {
            mailboxes = mailboxes.filter { $0.name.lowercased().contains(name) }
        }
        if let parent = filter["parentId"], !parent.isNull { mailboxes = [] }
        if let subscribed = filter["isSubscribed"]?.bool, !subscribed { mailboxes = [] }
        mailboxes.sort {
            let (left, right) =
                byName
                ? ($0.name.lowercased(), $1.name.lowercased())
                : (String(Self.sortOrder($0.role)) + "/" + $0.name, String(Self.sortOrder($1.role)) + "/" + $1.name)
            return ascending ? left < right : right < left
        }
        let ids = mailboxes.map(\.id.rawValue)
        let window = try QueryWindow(arguments, total: ids.count, anchorIndex: { ids.firstIndex(of: $0) })
        var result: [String: JSONValue] = [
            "accountId": .string(account.jmapID), "queryState": .string(self.state(state.modseq)),
            "canCalculateChanges": false, "position": .int(window.position),
            "ids": .strings(Array(ids[window.range])),
        ]
        if try arguments.bool("calculateTotal", default: false) { result["total"] = .int(ids.count) }
        return .object(result)
    }

    /// The name a Mailbox/set create or update gives, checked; the other settable properties may only repeat what
    /// every mailbox here is (no parent, no role for a new one, subscribed).
    static func mailboxName(_ object: JSONValue, creating: Bool) -> Result<String?, SetError> {
        func invalid(_ property: String, _ description: String) -> Result<String?, SetError> {
            .failure(SetError(setError("invalidProperties", description, properties: [property])))
        }
        guard let members = object.object else {
            return .failure(SetError(setError("invalidArguments", "A mailbox must be an object.")))
        }
        var name: String?
        for (property, value) in members {
            switch property {
            case "name":
                guard let text = value.string else { return invalid("name", "'name' must be a string.") }
                name = text
            case "parentId":
                guard value.isNull else { return invalid("parentId", "Mailboxes are not nested here.") }
            case "role" where creating:
                guard value.isNull else { return invalid("role", "Each role's mailbox exists already.") }
            case "isSubscribed":
                guard value.bool != nil else { return invalid("isSubscribed", "'isSubscribed' must be a boolean.") }
            case "sortOrder":
                guard value.int != nil else { return invalid("sortOrder", "'sortOrder' must be a number.") }
            default:
                return invalid(property, "'\(property)' cannot be set.")
            }
        }
        if creating, name == nil { return invalid("name", "A new mailbox needs a 'name'.") }
        return .success(name)
    }

    /// A store failure of a create, rename or destroy as its SetError; `nil` for one the whole method fails with.
    static func mailboxSetError(_ error: any Error) -> JSONValue? {
        switch error as? MailboxStoreError {
        case .notFound?: setError("notFound", "No such mailbox.")
        case .mailboxExists?: setError("invalidProperties", "A mailbox of that name exists.", properties: ["name"])
        case .invalidArgument(let what)?: setError("invalidProperties", "Invalid \(what).", properties: ["name"])
        case .roleMailbox?: setError("forbidden", "A role's mailbox cannot be renamed or destroyed.")
        case .mailboxHasMessages?:
            setError("mailboxHasEmail", "The mailbox holds emails; set onDestroyRemoveEmails to destroy them too.")
        default: nil
        }
    }

    func mailboxSet(_ arguments: Arguments) async throws -> JSONValue {
        let (create, update, destroy) = try setCounts(arguments)
        let removeEmails = try arguments.bool("onDestroyRemoveEmails", default: false)
        let old = try await storeCall { try await store.currentState(accountID: account.id) }
        try checkIfInState(arguments, current: state(old.modseq))
        var created: [String: JSONValue] = [:]
        var notCreated: [String: JSONValue] = [:]
        for (creationID, object) in create.sorted(by: { $0.key < $1.key }) {
            switch Self.mailboxName(object, creating: true) {
            case .failure(let error): notCreated[creationID] = error.value
            case .success(let name):
                do {
                    let mailbox = try await store.createMailbox(accountID: account.id, name: name ?? "")
                    // The id and the properties the server set (RFC 8620 section 5.3).
                    created[creationID] = Self.mailboxObject(
                        mailbox,
                        properties: [
                            "role", "parentId", "sortOrder", "totalEmails", "unreadEmails", "totalThreads",
                            "unreadThreads", "isSubscribed",
                        ])
                } catch {
                    guard let setError = Self.mailboxSetError(error) else { throw MethodError.from(error) }
                    notCreated[creationID] = setError
                }
            }
        }
        var updated: [String: JSONValue] = [:]
        var notUpdated: [String: JSONValue] = [:]
        for (id, patch) in update.sorted(by: { $0.key < $1.key }) {
            switch Self.mailboxName(patch, creating: false) {
            case .failure(let error): notUpdated[id] = error.value
            case .success(let name):
                do {
                    if let name {
                        try await store.renameMailbox(accountID: account.id, id: MailboxID(rawValue: id), to: name)
                    } else {
                        // Nothing to change: the mailbox need only exist.
                        _ = try await store.mailboxRowID(accountID: account.id, mailbox: MailboxID(rawValue: id))
                    }
                    updated[id] = .null
                } catch {
                    guard let setError = Self.mailboxSetError(error) else { throw MethodError.from(error) }
                    notUpdated[id] = setError
                }
            }
        }
        var destroyed: [String] = []
        var notDestroyed: [String: JSONValue] = [:]
        for id in destroy {
            do {
                try await store.destroyMailbox(
                    accountID: account.id, id: MailboxID(rawValue: id), removingMessages: removeEmails)
                destroyed.append(id)
            } catch {
                guard let setError = Self.mailboxSetError(error) else { throw MethodError.from(error) }
                notDestroyed[id] = setError
            }
        }
        let new = try await storeCall { try await store.currentState(accountID: account.id) }
        return [
            "accountId": .string(account.jmapID), "oldState": .string(state(old.modseq)),
            "newState": .string(state(new.modseq)),
            "created": created.isEmpty ? .null : .object(created),
            "updated": updated.isEmpty ? .null : .object(updated),
            "destroyed": destroyed.isEmpty ? .null : .strings(destroyed),
            "notCreated": notCreated.isEmpty ? .null : .object(notCreated),
            "notUpdated": notUpdated.isEmpty ? .null : .object(notUpdated),
            "notDestroyed": notDestroyed.isEmpty ? .null : .object(notDestroyed),
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
            try await store.changedIDs(accountID: account.id, since: since, maxChanges: limit)
        }
        // A thread changes when its email arrives or goes; a flag or a move is no change to the thread.
        let newState = changes.hasMore ? changes.newState.modseq : max(counters.membershipModseq, since.modseq)
        return [
            "accountId": .string(account.jmapID), "oldState": .string(state(since.modseq)),
            "newState": .string(state(newState)), "hasMoreChanges": .bool(changes.hasMore),
            "created": .strings(changes.created.map(Self.threadID)), "updated": [],
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
