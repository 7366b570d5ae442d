import ConnectionLoop
import Foundation

extension IMAPSession {
    /// The FETCH items a macro stands for.
    static func expand(_ items: [String]) -> [String] {
        items.flatMap { item -> [String] in
            switch item {
            case "ALL": ["FLAGS", "INTERNALDATE", "RFC822.SIZE", "ENVELOPE"]
            case "FAST": ["FLAGS", "INTERNALDATE", "RFC822.SIZE"]
            case "FULL": ["FLAGS", "INTERNALDATE", "RFC822.SIZE", "ENVELOPE", "BODY"]
            default: [item]
            }
        }
    }

    mutating func fetch(
        tag: String, uid: Bool, arguments: [IMAPToken], selected: Selected
    ) -> [LoopAction<IMAPAnswer>] {
        guard arguments.count >= 2, let set = arguments[0].text.flatMap(IMAPSequenceSet.init) else {
            return [send("\(tag) BAD FETCH needs a set and items")]
        }
        var items: [String]
        switch arguments[1] {
        case .list(let list): items = list.compactMap(\.text).map { Self.normalized($0) }
        case let token: items = [Self.normalized(token.text ?? "")]
        }
        items = Self.expand(items)
        var changedSince: Int64?
        var vanished = false
        if arguments.count == 3, case .list(let modifiers) = arguments[2] {
            for (index, modifier) in modifiers.enumerated() {
                switch modifier.text?.uppercased() {
                case "CHANGEDSINCE":
                    guard index + 1 < modifiers.count, let value = modifiers[index + 1].text.flatMap({ Int64($0) })
                    else { return [send("\(tag) BAD CHANGEDSINCE needs a modseq")] }
                    changedSince = value
                    condstore = true
                case "VANISHED": vanished = true
                default: continue
                }
            }
        }
        // RFC 7162 section 3.2.6: VANISHED only in a UID FETCH with CHANGEDSINCE, once QRESYNC is enabled.
        if vanished, !(uid && qresync && changedSince != nil) {
            return [send("\(tag) BAD VANISHED needs UID FETCH, CHANGEDSINCE and ENABLE QRESYNC")]
        }
        let known: Set<String> = [
            "FLAGS", "UID", "INTERNALDATE", "RFC822.SIZE", "ENVELOPE", "BODYSTRUCTURE", "BODY", "RFC822",
            "RFC822.HEADER", "RFC822.TEXT", "MODSEQ", "EMAILID", "THREADID",
        ]
        for item in items
        where !known.contains(item) && !item.hasPrefix("BODY[") && !item.hasPrefix("BODY.PEEK[")
            && !item.hasPrefix("BINARY[") && !item.hasPrefix("BINARY.PEEK[") && !item.hasPrefix("BINARY.SIZE[")
        {
            return [send("\(tag) BAD Unknown FETCH item \(Self.printable(item))")]
        }
        if items.contains("MODSEQ") { condstore = true }
        guard Self.validSequence(set, uid: uid, in: selected.snapshot) else {
            return [send("\(tag) BAD Invalid message sequence number")]
        }
        var messages = Self.messages(in: set, uid: uid, of: selected.snapshot)
        if let changedSince { messages = messages.filter { $0.modseq > changedSince } }
        var vanishedLine: [LoopAction<IMAPAnswer>] = []
        if vanished {
            // The UIDs of the set that are not in the mailbox. As for a QRESYNC SELECT, the store keeps no UIDs of
            // messages gone, so this may name UIDs that never were here (RFC 7162 allows it); sent before the FETCHes.
            let largest = max(selected.snapshot.uidNext, 1) - 1
            let gone = set.subtracting(count: selected.snapshot.messages.count, largest: largest) {
                selected.snapshot.messages[$0].uid
            }
            if !gone.isEmpty { vanishedLine = [send("* VANISHED (EARLIER) \(IMAPSequenceSet.write(ranges: gone))")] }
        }
        let needsContent = items.contains { !Self.stateItems.contains($0) }
        guard needsContent, !messages.isEmpty, let account = currentAccount else {
            return vanishedLine
                + fetchResponses(
                    tag: tag, uid: uid, messages: messages, items: items, contents: [:], summaries: [:],
                    changedSince: changedSince)
        }
        // Items a summary answers: the messages the cache holds need no read; with every one held, none at all.
        var summaries: [String: IMAPMessageSummary] = [:]
        var wanted = messages
        if items.allSatisfy({ Self.stateItems.contains($0) || Self.summaryItems.contains($0) }) {
            summaries = fetchCache.summaries(account: account, ids: messages.map(\.id))
            wanted = messages.filter { summaries[$0.id] == nil }
            if wanted.isEmpty {
                return vanishedLine
                    + fetchResponses(
                        tag: tag, uid: uid, messages: messages, items: items, contents: [:], summaries: summaries,
                        changedSince: changedSince)
            }
        }
        pending = .fetch(
            tag: tag, uid: uid, messages: messages, items: items, changedSince: changedSince, summaries: summaries)
        let backend = backend
        let ids = wanted.map(\.id)
        return vanishedLine + [
            .ask { _, answer in backend.contents(account: account, ids: ids) { answer(.contents($0)) } }
        ]
    }

    /// FETCH items the selected mailbox's state answers.
    static let stateItems: Set<String> = ["FLAGS", "UID", "MODSEQ", "EMAILID", "THREADID"]
    /// FETCH items an ``IMAPMessageSummary`` answers.
    static let summaryItems: Set<String> = ["INTERNALDATE", "RFC822.SIZE", "ENVELOPE", "BODYSTRUCTURE", "BODY"]

    /// An item in upper case but for the header names inside a section, which are compared without case anyway.
    static func normalized(_ item: String) -> String { item.uppercased() }

    /// The FETCH answers for `messages`: their state, and what `summaries` (the cache's) and `contents` (read for
    /// this FETCH) tell. A summary made from contents here goes into the cache.
    mutating func fetchResponses(
        tag: String, uid: Bool, messages: [IMAPMessageState], items: [String], contents: [String: IMAPMessageContent],
        summaries: [String: IMAPMessageSummary], changedSince: Int64?
    ) -> [LoopAction<IMAPAnswer>] {
        guard case .selected(let account, let selected) = state else { return [send("\(tag) OK FETCH completed")] }
        var actions: [LoopAction<IMAPAnswer>] = []
        var marksSeen: [IMAPMessageState] = []
        var made: [String: IMAPMessageSummary] = [:]
        defer { fetchCache.insert(account: account, made) }
        for message in messages {
            guard let number = Self.index(of: message.uid, in: selected.snapshot.messages).map({ $0 + 1 }) else {
                continue
            }
            let content = contents[message.id]
            var parts: [[UInt8]] = []
            var flagsNeeded = items.contains("FLAGS")
            if uid || items.contains("UID") { parts.append(Array("UID \(message.uid)".utf8)) }
            let parsed = content.map { IMAPMessagePart($0.raw[...]) }
            var summary = summaries[message.id]
            if summary == nil, let content, let parsed {
                summary = IMAPMessageSummary(content: content, parsed: parsed)
                made[message.id] = summary
            }
            for item in items {
                switch item {
                case "FLAGS", "UID": continue
                case "MODSEQ": continue
                // RFC 8474: the store's message id, the same as `/v1` and JMAP name it; threads are not kept.
                case "EMAILID": parts.append(Array("EMAILID (\(message.id))".utf8))
                case "THREADID": parts.append(Array("THREADID NIL".utf8))
                case "INTERNALDATE":
                    parts.append(Array("INTERNALDATE \(IMAPResponse.internalDate(summary?.receivedAt ?? 0))".utf8))
                case "RFC822.SIZE": parts.append(Array("RFC822.SIZE \(summary?.size ?? 0)".utf8))
                case "ENVELOPE":
                    if let summary { parts.append(Array("ENVELOPE ".utf8) + summary.envelope) }
                case "BODYSTRUCTURE", "BODY":
                    if let summary { parts.append(Array("\(item) ".utf8) + summary.structure) }
                case "RFC822":
                    if let content { parts.append(Array("RFC822 ".utf8) + IMAPResponse.literal(content.raw)) }
                    if !message.seen, !selected.readOnly { marksSeen.append(message) }
                case "RFC822.HEADER":
                    if let parsed {
                        parts.append(Array("RFC822.HEADER ".utf8) + IMAPResponse.literal(Array(parsed.header)))
                    }
                case "RFC822.TEXT":
                    if let parsed {
                        parts.append(Array("RFC822.TEXT ".utf8) + IMAPResponse.literal(Array(parsed.body)))
                    }
                    if !message.seen, !selected.readOnly { marksSeen.append(message) }
                default:
                    guard let parsed, let section = Self.section(item, of: parsed) else {
                        return [send("\(tag) BAD Invalid section \(Self.printable(item))")]
                    }
                    parts.append(section.response)
                    if !item.contains(".PEEK"), !message.seen, !selected.readOnly { marksSeen.append(message) }
                }
            }
            if marksSeen.last?.uid == message.uid { flagsNeeded = true }
            let seen = message.seen || marksSeen.last?.uid == message.uid
            if flagsNeeded {
                let flags = IMAPResponse.flags(message, seen: seen, deleted: selected.deleted.contains(message.uid))
                parts.append(Array("FLAGS \(flags)".utf8))
            }
            if condstore || changedSince != nil || items.contains("MODSEQ") {
                parts.append(Array("MODSEQ (\(message.modseq))".utf8))
            }
            var line = Array("* \(number) FETCH (".utf8)
            for (index, part) in parts.enumerated() {
                if index > 0 { line.append(0x20) }
                line += part
            }
            actions.append(.send(line + Array(")\r\n".utf8)))
        }
        guard !marksSeen.isEmpty, !selected.readOnly else {
            return actions + [send("\(tag) OK FETCH completed")]
        }
        // Reading a body sets \Seen (RFC 9051 section 6.4.5): stored, and told with the tagged answer.
        state = .selected(account: account, selected)
        pending = .store(tag: tag, uid: uid, silent: true, failed: [])
        let backend = backend
        let changes = marksSeen.map { IMAPFlagChange(id: $0.id, seen: true, flagged: nil) }
        return actions + [
            .ask { _, answer in backend.setFlags(account: account, changes: changes) { answer(.states($0)) } }
        ]
    }

    /// `BODY[section]<partial>`, `BODY.PEEK[…]`, `BINARY[…]`, `BINARY.SIZE[…]`: the answer's bytes.
    static func section(_ item: String, of message: IMAPMessagePart) -> (response: [UInt8], Void)? {
        guard let open = item.firstIndex(of: "["), let close = item.lastIndex(of: "]") else { return nil }
        let kind = item[..<open].replacingOccurrences(of: ".PEEK", with: "")
        let spec = String(item[item.index(after: open)..<close])
        var partial: (Int, Int)?
        let rest = item[item.index(after: close)...]
        if !rest.isEmpty {
            let numbers = rest.dropFirst().dropLast().split(separator: ".")
            guard rest.hasPrefix("<"), rest.hasSuffix(">"), numbers.count == 2, let start = Int(numbers[0]),
                let length = Int(numbers[1])
            else { return nil }
            partial = (start, length)
        }
        // The part path, then the text specifier.
        var path: [Int] = []
        var specifier = Substring(spec)
        while let dot = specifier.firstIndex(of: ".") ?? (specifier.allSatisfy(\.isNumber) ? specifier.endIndex : nil),
            let number = Int(specifier[..<dot])
        {
            path.append(number)
            specifier = dot == specifier.endIndex ? "" : specifier[specifier.index(after: dot)...]
        }
        guard let part = message.part(path) else { return nil }
        var bytes: [UInt8]
        let upper = specifier.uppercased()
        switch upper {
        case "":
            bytes = path.isEmpty ? Array(part.header) + Array(part.body) : Array(part.body)
        case "HEADER": bytes = Array(part.header)
        case "TEXT": bytes = Array(part.body)
        case "MIME": bytes = Array(part.header)
        default:
            guard upper.hasPrefix("HEADER.FIELDS") else { return nil }
            let not = upper.hasPrefix("HEADER.FIELDS.NOT")
            guard let listOpen = upper.firstIndex(of: "("), let listClose = upper.lastIndex(of: ")") else { return nil }
            let names = Set(
                upper[upper.index(after: listOpen)..<listClose].split(separator: " ").map {
                    $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")).lowercased()
                })
            bytes = []
            for field in IMAPMessagePart.fields(of: part.header) where names.contains(field.0.lowercased()) != not {
                bytes += field.2
            }
            bytes += [0x0D, 0x0A]
        }
        if kind == "BINARY.SIZE" { return (Array("BINARY.SIZE[\(spec)] \(bytes.count)".utf8), ()) }
        var label = "\(kind)[\(spec)]"
        if let (start, length) = partial {
            let from = min(start, bytes.count)
            bytes = Array(bytes[from..<min(bytes.count, from + length)])
            label += "<\(start)>"
        }
        return (Array("\(label) ".utf8) + IMAPResponse.literal(bytes), ())
    }

    mutating func store(
        tag: String, uid: Bool, arguments: [IMAPToken], selected: inout Selected, account: Int64
    ) -> [LoopAction<IMAPAnswer>] {
        var arguments = arguments
        guard arguments.count >= 3, let set = arguments[0].text.flatMap(IMAPSequenceSet.init) else {
            return [send("\(tag) BAD STORE needs a set, an action and flags")]
        }
        var unchangedSince: Int64?
        if case .list(let modifiers) = arguments[1] {
            guard modifiers.count == 2, modifiers[0].text?.uppercased() == "UNCHANGEDSINCE",
                let value = modifiers[1].text.flatMap({ Int64($0) })
            else { return [send("\(tag) BAD Unknown STORE modifier")] }
            unchangedSince = value
            condstore = true
            arguments.remove(at: 1)
        }
        guard arguments.count >= 3, var action = arguments[1].text?.uppercased() else {
            return [send("\(tag) BAD STORE needs an action")]
        }
        let silent = action.hasSuffix(".SILENT")
        if silent { action = String(action.dropLast(7)) }
        var flags: [String] = []
        for token in arguments.dropFirst(2) {
            if case .list(let list) = token {
                flags += list.compactMap(\.text)
            } else if let text = token.text {
                flags.append(text)
            }
        }
        let names = Set(flags.map { $0.lowercased() })
        guard ["FLAGS", "+FLAGS", "-FLAGS"].contains(action) else { return [send("\(tag) BAD Unknown STORE action")] }
        guard Self.validSequence(set, uid: uid, in: selected.snapshot) else {
            return [send("\(tag) BAD Invalid message sequence number")]
        }
        var messages = Self.messages(in: set, uid: uid, of: selected.snapshot)
        var failed: [UInt32] = []
        if let unchangedSince {
            failed = messages.filter { $0.modseq > unchangedSince }.map { uid ? $0.uid : $0.uid }
            messages.removeAll { $0.modseq > unchangedSince }
        }
        var changes: [IMAPFlagChange] = []
        for message in messages {
            func value(_ flag: String, _ current: Bool) -> Bool {
                switch action {
                case "FLAGS": names.contains(flag)
                case "+FLAGS": current || names.contains(flag)
                default: current && !names.contains(flag)
                }
            }
            let seen = value("\\seen", message.seen)
            let flagged = value("\\flagged", message.flagged)
            let named = Set(names.compactMap(IMAPFlag.keyword))
            let current = Set(message.keywords)
            let (adding, removing): (Set<String>, Set<String>) =
                switch action {
                case "FLAGS": (named.subtracting(current), current.subtracting(named))
                case "+FLAGS": (named.subtracting(current), [])
                default: ([], named.intersection(current))
                }
            if value("\\deleted", selected.deleted.contains(message.uid)) {
                selected.deleted.insert(message.uid)
            } else {
                selected.deleted.remove(message.uid)
            }
            changes.append(
                IMAPFlagChange(
                    id: message.id, seen: seen, flagged: flagged, addingKeywords: adding, removingKeywords: removing))
        }
        state = .selected(account: account, selected)
        guard !changes.isEmpty else {
            let code = failed.isEmpty ? "" : "[MODIFIED \(IMAPSequenceSet.write(failed))] "
            return [send("\(tag) OK \(code)STORE completed")]
        }
        pending = .store(tag: tag, uid: uid, silent: silent, failed: failed)
        let backend = backend
        let asked = changes
        return [.ask { _, answer in backend.setFlags(account: account, changes: asked) { answer(.states($0)) } }]
    }

    /// SEARCH over what the session holds: sets, flags and MODSEQ; text keys are refused with `NO [CANNOT]`.
    /// A SEARCH, parsed, waiting for its messages' contents when its keys read them.
    struct Search {
        var tag: String
        var uid: Bool
        var key: IMAPSearchKey
        /// ESEARCH's RETURN options (RFC 4731, RFC 9051); nil for a plain SEARCH.
        var returning: Set<String>?
    }

    mutating func search(
        tag: String, uid: Bool, arguments: [IMAPToken], selected: Selected
    ) -> [LoopAction<IMAPAnswer>] {
        var tokens = arguments[...]
        var returning: Set<String>?
        if tokens.first?.text?.uppercased() == "RETURN" {
            tokens.removeFirst()
            guard case .list(let options) = tokens.popFirst() else { return [send("\(tag) BAD RETURN needs a list")] }
            let named = Set(options.compactMap { $0.text?.uppercased() })
            guard named.isSubset(of: ["MIN", "MAX", "COUNT", "ALL"]) else {
                return [send("\(tag) BAD RETURN takes MIN, MAX, COUNT and ALL")]
            }
            returning = named.isEmpty ? ["ALL"] : named
        }
        if tokens.first?.text?.uppercased() == "CHARSET" {
            tokens.removeFirst()
            guard let charset = tokens.popFirst()?.text?.uppercased(), ["UTF-8", "US-ASCII"].contains(charset) else {
                return [send("\(tag) NO [BADCHARSET (UTF-8 US-ASCII)] Only UTF-8 and US-ASCII are searched")]
            }
        }
        let key: IMAPSearchKey
        do {
            key = try IMAPSearchKey.parse(Array(tokens))
        } catch {
            return [send("\(tag) \(error.message)")]
        }
        let search = Search(tag: tag, uid: uid, key: key, returning: returning)
        guard key.needsContent, !selected.snapshot.messages.isEmpty, let account = currentAccount else {
            return searchResponses(search, contents: [:])
        }
        // Content keys read every message of the mailbox once (there is no index of words): the backend answers in
        // slices, and nothing else runs on this connection meanwhile.
        pending = .search(search)
        let ids = selected.snapshot.messages.map(\.id)
        let backend = backend
        return [.ask { _, answer in backend.contents(account: account, ids: ids) { answer(.contents($0)) } }]
    }

    /// The SEARCH or ESEARCH answer, the messages matched against the mailbox as selected now.
    func searchResponses(_ search: Search, contents: [String: IMAPMessageContent]) -> [LoopAction<IMAPAnswer>] {
        guard case .selected(_, let selected) = state else { return [send("\(search.tag) OK SEARCH completed")] }
        let messages = selected.snapshot.messages
        let context = IMAPSearchKey.Context(
            deleted: selected.deleted, messageCount: UInt32(messages.count), largestUID: messages.last?.uid ?? 0)
        var numbers: [UInt32] = []
        var highest: Int64 = 0
        for (index, message) in messages.enumerated()
        where search.key.matches(message, number: UInt32(index + 1), content: contents[message.id], in: context) {
            numbers.append(search.uid ? message.uid : UInt32(index + 1))
            highest = max(highest, message.modseq)
        }
        // With a MODSEQ key the answer names the highest MODSEQ of the messages found (RFC 7162 section 3.1.5).
        let modseq = search.key.usesModseq && !numbers.isEmpty ? highest : nil
        guard let returning = search.returning else {
            var line = "* SEARCH" + numbers.map { " \($0)" }.joined()
            if let modseq { line += " (MODSEQ \(modseq))" }
            return [send(line), send("\(search.tag) OK SEARCH completed")]
        }
        var line = "* ESEARCH (TAG \"\(search.tag)\")" + (search.uid ? " UID" : "")
        if let first = numbers.first, returning.contains("MIN") { line += " MIN \(first)" }
        if let last = numbers.last, returning.contains("MAX") { line += " MAX \(last)" }
        if returning.contains("COUNT") { line += " COUNT \(numbers.count)" }
        if !numbers.isEmpty, returning.contains("ALL") { line += " ALL \(IMAPSequenceSet.write(numbers))" }
        if let modseq { line += " MODSEQ \(modseq)" }
        return [send(line), send("\(search.tag) OK SEARCH completed")]
    }
}
