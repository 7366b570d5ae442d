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
        if arguments.count == 3, case .list(let modifiers) = arguments[2] {
            for (index, modifier) in modifiers.enumerated() where modifier.text?.uppercased() == "CHANGEDSINCE" {
                guard index + 1 < modifiers.count, let value = modifiers[index + 1].text.flatMap({ Int64($0) }) else {
                    return [send("\(tag) BAD CHANGEDSINCE needs a modseq")]
                }
                changedSince = value
                condstore = true
            }
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
        let needsContent = items.contains { !["FLAGS", "UID", "MODSEQ", "EMAILID", "THREADID"].contains($0) }
        guard needsContent, !messages.isEmpty, let account = currentAccount else {
            return fetchResponses(
                tag: tag, uid: uid, messages: messages, items: items, contents: [:], changedSince: changedSince)
        }
        pending = .fetch(tag: tag, uid: uid, messages: messages, items: items, changedSince: changedSince)
        let backend = backend
        let ids = messages.map(\.id)
        return [.ask { _, answer in backend.contents(account: account, ids: ids) { answer(.contents($0)) } }]
    }

    /// An item in upper case but for the header names inside a section, which are compared without case anyway.
    static func normalized(_ item: String) -> String { item.uppercased() }

    mutating func fetchResponses(
        tag: String, uid: Bool, messages: [IMAPMessageState], items: [String], contents: [String: IMAPMessageContent],
        changedSince: Int64?
    ) -> [LoopAction<IMAPAnswer>] {
        guard case .selected(let account, let selected) = state else { return [send("\(tag) OK FETCH completed")] }
        var actions: [LoopAction<IMAPAnswer>] = []
        var marksSeen: [IMAPMessageState] = []
        for message in messages {
            guard let number = Self.index(of: message.uid, in: selected.snapshot.messages).map({ $0 + 1 }) else {
                continue
            }
            let content = contents[message.id]
            var parts: [[UInt8]] = []
            var flagsNeeded = items.contains("FLAGS")
            if uid || items.contains("UID") { parts.append(Array("UID \(message.uid)".utf8)) }
            let parsed = content.map { IMAPMessagePart($0.raw[...]) }
            for item in items {
                switch item {
                case "FLAGS", "UID": continue
                case "MODSEQ": continue
                // RFC 8474: the store's message id, the same as `/v1` and JMAP name it; threads are not kept.
                case "EMAILID": parts.append(Array("EMAILID (\(message.id))".utf8))
                case "THREADID": parts.append(Array("THREADID NIL".utf8))
                case "INTERNALDATE":
                    parts.append(Array("INTERNALDATE \(IMAPResponse.internalDate(content?.receivedAt ?? 0))".utf8))
                case "RFC822.SIZE": parts.append(Array("RFC822.SIZE \(content?.raw.count ?? 0)".utf8))
                case "ENVELOPE":
                    if let content { parts.append(Array("ENVELOPE ".utf8) + IMAPResponse.envelope(content.envelope)) }
                case "BODYSTRUCTURE", "BODY":
                    if let parsed { parts.append(Array("\(item) ".utf8) + parsed.structure) }
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
                let flags = IMAPResponse.flags(
                    seen: seen, flagged: message.flagged, deleted: selected.deleted.contains(message.uid))
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
            if value("\\deleted", selected.deleted.contains(message.uid)) {
                selected.deleted.insert(message.uid)
            } else {
                selected.deleted.remove(message.uid)
            }
            changes.append(IMAPFlagChange(id: message.id, seen: seen, flagged: flagged))
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
    func search(tag: String, uid: Bool, arguments: [IMAPToken], selected: Selected) -> [LoopAction<IMAPAnswer>] {
        var tokens = arguments[...]
        var esearch = false
        if tokens.first?.text?.uppercased() == "RETURN" {
            esearch = true
            tokens = tokens.dropFirst(2)
        }
        if tokens.first?.text?.uppercased() == "CHARSET" { tokens = tokens.dropFirst(2) }
        var keys = Array(tokens)
        var criteria: [(IMAPMessageState, Int) -> Bool] = []
        var usedModseq = false
        do {
            while !keys.isEmpty {
                criteria.append(try Self.criterion(&keys, selected: selected, usedModseq: &usedModseq))
            }
        } catch {
            return [send("\(tag) \(error.message)")]
        }
        let matched = selected.snapshot.messages.enumerated().filter { entry in
            criteria.allSatisfy { $0(entry.element, entry.offset + 1) }
        }
        let numbers = matched.map { uid ? $0.element.uid : UInt32($0.offset + 1) }
        let highest = matched.map(\.element.modseq).max()
        if esearch {
            var line = "* ESEARCH (TAG \"\(tag)\")" + (uid ? " UID" : "")
            if !numbers.isEmpty { line += " ALL \(IMAPSequenceSet.write(numbers))" }
            return [send(line), send("\(tag) OK SEARCH completed")]
        }
        var line = "* SEARCH" + numbers.map { " \($0)" }.joined()
        if usedModseq, let highest { line += " (MODSEQ \(highest))" }
        return [send(line), send("\(tag) OK SEARCH completed")]
    }

    struct SearchError: Error {
        var message: String
    }

    static func criterion(
        _ keys: inout [IMAPToken], selected: Selected, usedModseq: inout Bool
    ) throws(SearchError) -> (IMAPMessageState, Int) -> Bool {
        let token = keys.removeFirst()
        if case .list(let inner) = token {
            var innerKeys = inner
            var all: [(IMAPMessageState, Int) -> Bool] = []
            while !innerKeys.isEmpty {
                all.append(try criterion(&innerKeys, selected: selected, usedModseq: &usedModseq))
            }
            return { message, number in all.allSatisfy { $0(message, number) } }
        }
        guard let key = token.text?.uppercased() else { throw SearchError(message: "BAD Invalid search key") }
        let deleted = selected.deleted
        let largestUID = selected.snapshot.messages.last?.uid ?? 0
        let count = UInt32(selected.snapshot.messages.count)
        switch key {
        case "ALL": return { _, _ in true }
        case "SEEN": return { message, _ in message.seen }
        case "UNSEEN", "NEW": return { message, _ in !message.seen }
        case "FLAGGED": return { message, _ in message.flagged }
        case "UNFLAGGED": return { message, _ in !message.flagged }
        case "DELETED": return { message, _ in deleted.contains(message.uid) }
        case "UNDELETED": return { message, _ in !deleted.contains(message.uid) }
        case "ANSWERED", "DRAFT", "RECENT": return { _, _ in false }
        case "UNANSWERED", "UNDRAFT", "OLD": return { _, _ in true }
        case "NOT":
            guard !keys.isEmpty else { throw SearchError(message: "BAD NOT needs a key") }
            let inner = try criterion(&keys, selected: selected, usedModseq: &usedModseq)
            return { message, number in !inner(message, number) }
        case "OR":
            guard keys.count >= 2 else { throw SearchError(message: "BAD OR needs two keys") }
            let left = try criterion(&keys, selected: selected, usedModseq: &usedModseq)
            let right = try criterion(&keys, selected: selected, usedModseq: &usedModseq)
            return { message, number in left(message, number) || right(message, number) }
        case "UID":
            guard !keys.isEmpty, let set = keys.removeFirst().text.flatMap(IMAPSequenceSet.init) else {
                throw SearchError(message: "BAD UID needs a set")
            }
            return { message, _ in set.contains(message.uid, largest: largestUID) }
        case "MODSEQ":
            // MODSEQ [entry-name entry-type] value (RFC 7162 section 3.1.5).
            if keys.count >= 3, case .string = keys[0] { keys.removeFirst(2) }
            guard !keys.isEmpty, let value = keys.removeFirst().text.flatMap({ Int64($0) }) else {
                throw SearchError(message: "BAD MODSEQ needs a value")
            }
            usedModseq = true
            return { message, _ in message.modseq >= value }
        default:
            if let set = IMAPSequenceSet(key) {
                return { _, number in set.contains(UInt32(number), largest: count) }
            }
            let textKeys: Set = [
                "FROM", "TO", "CC", "BCC", "SUBJECT", "BODY", "TEXT", "HEADER", "BEFORE", "ON", "SINCE", "SENTBEFORE",
                "SENTON", "SENTSINCE", "LARGER", "SMALLER", "KEYWORD", "UNKEYWORD",
            ]
            if textKeys.contains(key) {
                throw SearchError(message: "NO [CANNOT] Searching by \(key) is not supported yet")
            }
            throw SearchError(message: "BAD Unknown search key \(printable(key))")
        }
    }
}
