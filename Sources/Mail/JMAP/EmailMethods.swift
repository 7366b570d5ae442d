import JSONText
import MailMIME
import MailboxStore

/// Email/get, /changes, /query and /set (RFC 8621 §4) over the store's messages.
extension MethodContext {
    static let defaultEmailProperties = [
        "id", "blobId", "threadId", "mailboxIds", "keywords", "size", "receivedAt", "messageId", "inReplyTo",
        "references", "sender", "from", "to", "cc", "bcc", "replyTo", "subject", "sentAt", "hasAttachment",
        "preview", "bodyValues", "textBody", "htmlBody", "attachments",
    ]
    /// The properties read from the message's MIME form rather than the stored fields.
    static let parsedEmailProperties: Set<String> = [
        "references", "sender", "bcc", "replyTo", "headers", "bodyStructure", "bodyValues", "textBody", "htmlBody",
        "attachments",
    ]
    static let emailProperties = Set(defaultEmailProperties + ["headers", "bodyStructure"])

    static func isEmailProperty(_ name: String) -> Bool {
        emailProperties.contains(name) || HeaderProperty(name) != nil
    }

    // MARK: Email/get

    func emailGet(_ arguments: Arguments) async throws -> JSONValue {
        let requested = try getIDs(arguments)
        let properties = try properties(arguments, known: Self.isEmailProperty) ?? Self.defaultEmailProperties
        let bodyProperties =
            try self.properties(arguments, key: "bodyProperties") {
                BodyPartProperty.known.contains($0) || HeaderProperty($0) != nil
            }
            ?? BodyPartProperty.defaults
        let values = BodyValueOptions(
            text: try arguments.bool("fetchTextBodyValues", default: false),
            html: try arguments.bool("fetchHTMLBodyValues", default: false),
            all: try arguments.bool("fetchAllBodyValues", default: false),
            maxBytes: try arguments.int("maxBodyValueBytes", in: 0...Int64(Int32.max)) ?? 0)
        let ids: [String]
        if let requested {
            ids = requested
        } else {
            let page = try await storeCall {
                try await store.queryMessageIDs(
                    accountID: account.id, filter: nil, offset: 0, limit: limits.maxObjectsInGet + 1)
            }
            guard page.ids.count <= limits.maxObjectsInGet else {
                throw MethodError("requestTooLarge", "The account has more emails than maxObjectsInGet; pass 'ids'.")
            }
            ids = page.ids
        }
        let needsParse = properties.contains { Self.parsedEmailProperties.contains($0) || $0.hasPrefix("header:") }
        let read = try await storeCall {
            try await store.messages(ids: ids, accountID: account.id, sources: needsParse)
        }
        let (state, sources) = (read.state, read.sources)
        let byID = Dictionary(read.records.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var list: [JSONValue] = []
        for id in ids {
            guard let record = byID[id] else { continue }
            let parsed = sources[id].flatMap(ParsedEmail.init)
            list.append(
                EmailObject(record: record, parsed: parsed).json(
                    properties: properties, bodyProperties: bodyProperties, values: values))
        }
        return [
            "accountId": .string(account.jmapID), "state": .string(self.state(state.modseq)), "list": .array(list),
            "notFound": .strings(ids.filter { byID[$0] == nil }),
        ]
    }

    // MARK: Email/changes

    func emailChanges(_ arguments: Arguments) async throws -> JSONValue {
        let since = try sinceModseq(arguments)
        let limit = try maxChanges(arguments)
        let changes = try await storeCall {
            try await store.changedIDs(accountID: account.id, since: since, maxChanges: limit)
        }
        return [
            "accountId": .string(account.jmapID), "oldState": .string(state(changes.oldState.modseq)),
            "newState": .string(state(changes.newState.modseq)), "hasMoreChanges": .bool(changes.hasMore),
            "created": .strings(changes.created), "updated": .strings(changes.updated),
            "destroyed": .strings(changes.destroyed),
        ]
    }

    // MARK: Email/query

    /// The most ids one Email/query answers; a larger `limit` is cut to it and the answer says so.
    static let maximumQueryLimit = 1000

    func emailQuery(_ arguments: Arguments) async throws -> JSONValue {
        let filter = try arguments["filter"].map(Self.messageFilter)
        var order = MessageOrder.receivedAt
        var ascending = false
        if let sort = arguments["sort"] {
            guard let comparators = sort.array else { throw MethodError.invalidArguments("'sort' must be an array.") }
            if let first = comparators.first {
                guard let property = first["property"]?.string, let chosen = MessageOrder(rawValue: property) else {
                    throw MethodError(
                        "unsupportedSort",
                        "Email/query sorts by " + MessageOrder.allCases.map(\.rawValue).joined(separator: ", ") + ".")
                }
                order = chosen
                ascending = first["isAscending"]?.bool ?? true
            }
        }
        if try arguments.bool("collapseThreads", default: false) {
            // Every thread is one email: collapsing changes nothing.
        }
        let calculateTotal = try arguments.bool("calculateTotal", default: false)
        let askedLimit = try arguments.int("limit", in: 0...Int64(Int32.max))
        let limit = min(askedLimit ?? Self.maximumQueryLimit, Self.maximumQueryLimit)
        let position = try arguments.int("position", in: Int64(Int32.min)...Int64(Int32.max)) ?? 0
        let anchor = try arguments.string("anchor")
        var result: [String: JSONValue] = ["accountId": .string(account.jmapID), "canCalculateChanges": false]
        if anchor != nil || position < 0 {
            // The window depends on where the anchor (or the end) is: read every id, then cut.
            let page = try await storeCall {
                try await store.queryMessageIDs(
                    accountID: account.id, filter: filter, order: order, ascending: ascending)
            }
            var windowArguments = arguments.values
            windowArguments["limit"] = .int(limit)
            let window = try QueryWindow(Arguments(windowArguments), total: page.ids.count) {
                page.ids.firstIndex(of: $0)
            }
            result["queryState"] = .string(state(page.state.modseq))
            result["position"] = .int(window.position)
            result["ids"] = .strings(Array(page.ids[window.range]))
            if calculateTotal { result["total"] = .int(page.ids.count) }
        } else {
            let page = try await storeCall {
                try await store.queryMessageIDs(
                    accountID: account.id, filter: filter, order: order, ascending: ascending, offset: position,
                    limit: limit, countTotal: calculateTotal)
            }
            result["queryState"] = .string(state(page.state.modseq))
            result["position"] = .int(position)
            result["ids"] = .strings(page.ids)
            if let total = page.total { result["total"] = .int(total) }
        }
        if let askedLimit, askedLimit > limit { result["limit"] = .int(limit) }
        return .object(result)
    }

    /// A FilterOperator or FilterCondition (RFC 8621 §4.4.1) as the store's filter.
    static func messageFilter(_ value: JSONValue) throws -> MessageFilter {
        guard let object = value.object else { throw MethodError.invalidArguments("'filter' must be an object.") }
        if let op = object["operator"] {
            guard let conditions = object["conditions"]?.array else {
                throw MethodError.invalidArguments("A FilterOperator needs 'conditions'.")
            }
            let inner = try conditions.map(messageFilter)
            switch op.string {
            case "AND": return .all(inner)
            case "OR": return .any(inner)
            case "NOT": return .noneOf(inner)
            default: throw MethodError.invalidArguments("'operator' must be AND, OR or NOT.")
            }
        }
        var conditions: [MessageFilter] = []
        for (key, value) in object where !value.isNull {
            func text() throws -> String {
                guard let text = value.string else { throw MethodError.invalidArguments("'\(key)' must be a string.") }
                return text
            }
            func date() throws -> Double {
                guard let seconds = try JMAPDate.parse(text()) else {
                    throw MethodError.invalidArguments("'\(key)' must be a UTCDate.")
                }
                return seconds
            }
            func size() throws -> Int {
                guard let size = value.int, size >= 0 else {
                    throw MethodError.invalidArguments("'\(key)' must be an unsigned integer.")
                }
                return Int(size)
            }
            switch key {
            case "inMailbox":
                conditions.append(.inMailbox(MailboxID(rawValue: try text())))
            case "inMailboxOtherThan":
                guard let ids = value.array?.compactMap(\.string) else {
                    throw MethodError.invalidArguments("'inMailboxOtherThan' must be an array of ids.")
                }
                conditions.append(.notInMailboxes(ids.map(MailboxID.init(rawValue:))))
            case "text": conditions.append(.text(try text()))
            case "from": conditions.append(.from(try text()))
            case "to", "cc": conditions.append(.to(try text()))
            case "subject": conditions.append(.subject(try text()))
            case "body": conditions.append(.body(try text()))
            case "before": conditions.append(.receivedBefore(try date()))
            case "after": conditions.append(.receivedSince(try date()))
            case "minSize": conditions.append(.minSize(try size()))
            case "maxSize": conditions.append(.maxSize(try size()))
            case "hasAttachment":
                guard let flag = value.bool else {
                    throw MethodError.invalidArguments("'hasAttachment' must be a boolean.")
                }
                conditions.append(.hasAttachment(flag))
            case "hasKeyword", "notKeyword", "allInThreadHaveKeyword", "someInThreadHaveKeyword",
                "noneInThreadHaveKeyword":
                let has = key != "notKeyword" && key != "noneInThreadHaveKeyword"
                switch try text().lowercased() {
                case "$seen": conditions.append(.seen(has))
                case "$flagged": conditions.append(.flagged(has))
                case let keyword: conditions.append(has ? .keyword(keyword) : .noneOf([.keyword(keyword)]))
                }
            default:
                throw MethodError("unsupportedFilter", "Email/query cannot filter on '\(key)'.")
            }
        }
        return conditions.count == 1 ? conditions[0] : .all(conditions)
    }

    // MARK: Email/set

    func emailSet(_ arguments: Arguments) async throws -> JSONValue {
        let (create, update, destroy) = try setCounts(arguments)
        let old = try await storeCall { try await store.currentState(accountID: account.id) }
        let oldState = state(old.modseq)
        try checkIfInState(arguments, current: oldState)
        var notCreated: [String: JSONValue] = [:]
        for creationID in create.keys {
            notCreated[creationID] = Self.setError(
                "forbidden", "Emails arrive by delivery here; they cannot be created or imported.")
        }
        var updated: [String: JSONValue] = [:]
        var notUpdated: [String: JSONValue] = [:]
        let current = try await storeCall { try await store.messages(ids: Array(update.keys), accountID: account.id) }
        let byID = Dictionary(current.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        for (id, patch) in update {
            guard let record = byID[id] else {
                notUpdated[id] = Self.setError("notFound", "No such email.")
                continue
            }
            switch EmailPatch.apply(patch, to: record) {
            case .failure(let error): notUpdated[id] = error.value
            case .success(let change):
                do {
                    try await store.updateMessage(
                        id: id, accountID: account.id, seen: change.seen, flagged: change.flagged,
                        mailbox: change.mailbox, addingKeywords: change.addingKeywords,
                        removingKeywords: change.removingKeywords)
                    updated[id] = .null
                } catch MailboxStoreError.notFound {
                    notUpdated[id] = Self.setError("notFound", "No such email.")
                } catch MailboxStoreError.invalidArgument("mailbox") {
                    notUpdated[id] = Self.setError(
                        "invalidProperties", "No such mailbox in this account.", properties: ["mailboxIds"])
                } catch MailboxStoreError.invalidArgument(let what) where what.hasPrefix("keyword") {
                    notUpdated[id] = Self.setError(
                        "invalidProperties", "Invalid \(what).", properties: ["keywords"])
                } catch {
                    throw MethodError.from(error)
                }
            }
        }
        var destroyed: [String] = []
        var notDestroyed: [String: JSONValue] = [:]
        for id in destroy {
            do {
                try await store.destroyMessage(id: id, accountID: account.id)
                destroyed.append(id)
            } catch MailboxStoreError.notFound {
                notDestroyed[id] = Self.setError("notFound", "No such email.")
            } catch {
                throw MethodError.from(error)
            }
        }
        let new = try await storeCall { try await store.currentState(accountID: account.id) }
        return [
            "accountId": .string(account.jmapID), "oldState": .string(oldState), "newState": .string(state(new.modseq)),
            "created": .null, "updated": updated.isEmpty ? .null : .object(updated),
            "destroyed": destroyed.isEmpty ? .null : .strings(destroyed),
            "notCreated": notCreated.isEmpty ? .null : .object(notCreated),
            "notUpdated": notUpdated.isEmpty ? .null : .object(notUpdated),
            "notDestroyed": notDestroyed.isEmpty ? .null : .object(notDestroyed),
        ]
    }
}

/// A SetError object (RFC 8620 §5.3) as a thrown or returned failure.
struct SetError: Error {
    var value: JSONValue
    init(_ value: JSONValue) { self.value = value }
}

/// An Email/set update (RFC 8620 §5.3 PatchObject) as the store's change: its keywords (`$seen` and `$flagged`, the
/// store's flags, and the others it keeps) and the one mailbox an email is in.
struct EmailPatch {
    var seen: Bool?
    var flagged: Bool?
    var mailbox: MailboxID?
    var addingKeywords: Set<String> = []
    var removingKeywords: Set<String> = []

    /// `text` as one JSON Pointer reference token (RFC 6901): `~` written `~0`, `/` written `~1`.
    static func pointerToken(_ text: String) -> String {
        text.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1")
    }

    static func apply(_ patch: JSONValue, to record: MessageRecord) -> Result<EmailPatch, SetError> {
        func invalid(_ property: String, _ description: String) -> Result<EmailPatch, SetError> {
            .failure(SetError(MethodContext.setError("invalidProperties", description, properties: [property])))
        }
        guard let members = patch.object else {
            return .failure(SetError(MethodContext.setError("invalidPatch", "An update must be a PatchObject.")))
        }
        var keywords: [String: Bool] = ["$seen": record.seen, "$flagged": record.flagged]
        for keyword in record.keywords { keywords[keyword] = true }
        // The patch path that set each keyword, to name it back as the client wrote it (escapes and case kept).
        var keywordPaths: [String: String] = [:]
        var mailboxes: Set<String> = [record.mailbox.rawValue]
        for (path, value) in members {
            let tokens = path.split(separator: "/", omittingEmptySubsequences: false).map {
                $0.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
            }
            switch (tokens.first, tokens.count) {
            case ("keywords", 1):
                guard let object = value.object, object.values.allSatisfy({ $0 == .bool(true) }) else {
                    return invalid(path, "'keywords' must map keywords to true.")
                }
                keywords = keywords.mapValues { _ in false }
                for keyword in object.keys {
                    keywords[keyword.lowercased()] = true
                    keywordPaths[keyword.lowercased()] = "keywords/" + pointerToken(keyword)
                }
            case ("keywords", 2):
                guard value == .bool(true) || value.isNull else {
                    return invalid(path, "A keyword patch sets true or null.")
                }
                keywords[tokens[1].lowercased()] = !value.isNull
                keywordPaths[tokens[1].lowercased()] = path
            case ("mailboxIds", 1):
                guard let object = value.object, object.values.allSatisfy({ $0 == .bool(true) }) else {
                    return invalid(path, "'mailboxIds' must map mailbox ids to true.")
                }
                mailboxes = Set(object.keys)
            case ("mailboxIds", 2):
                guard value == .bool(true) || value.isNull else {
                    return invalid(path, "A mailboxIds patch sets true or null.")
                }
                if value.isNull { mailboxes.remove(tokens[1]) } else { mailboxes.insert(tokens[1]) }
            default:
                return invalid(path, "Only 'keywords' and 'mailboxIds' can be changed.")
            }
        }
        // A keyword a client may set: IMAP's atom (RFC 8621 section 4.1.1), at most 255 characters.
        let forbidden = Set("(){]%*\"\\".utf8)
        if let bad = keywords.keys.first(where: { keyword in
            !(1...255).contains(keyword.utf8.count)
                || !keyword.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7f && !forbidden.contains($0) }
        }) {
            return invalid(keywordPaths[bad] ?? "keywords", "Not a keyword: printable ASCII without ( ) { ] % * \" \\.")
        }
        let before = Set(record.keywords)
        let after = Set(keywords.filter { $0.value && $0.key != "$seen" && $0.key != "$flagged" }.keys)
        guard mailboxes.count == 1, let mailbox = mailboxes.first.map(MailboxID.init(rawValue:)) else {
            return invalid("mailboxIds", "An email is in exactly one mailbox of this account (maxMailboxesPerEmail 1).")
        }
        return .success(
            EmailPatch(
                seen: keywords["$seen"] == record.seen ? nil : keywords["$seen"],
                flagged: keywords["$flagged"] == record.flagged ? nil : keywords["$flagged"],
                mailbox: mailbox == record.mailbox ? nil : mailbox, addingKeywords: after.subtracting(before),
                removingKeywords: before.subtracting(after)))
    }
}
