import ConnectionLoop
import Foundation

/// What the backend answered, for the command that asked.
public enum IMAPAnswer: Sendable {
    case login(IMAPLoginResult)
    case mailboxes(Result<[IMAPMailboxInfo], IMAPBackendError>)
    case snapshot(Result<IMAPMailboxSnapshot, IMAPBackendError>)
    case delta(Result<IMAPMailboxDelta?, IMAPBackendError>)
    case contents(Result<[String: IMAPMessageContent], IMAPBackendError>)
    case states(Result<[IMAPMessageState], IMAPBackendError>)
    case moved(Result<IMAPMoveResult, IMAPBackendError>)
    case done(Result<Void, IMAPBackendError>)
}

/// What a connection is told unasked.
public enum IMAPEvent: Sendable {
    /// The account changed: an idling session looks at its mailbox again.
    case accountChanged
}

/// One IMAP connection's protocol (RFC 9051 and RFC 3501, with the extensions in ``capabilities``): a value-type state
/// machine on a ``ConnectionLoop``. Commands are read whole by ``IMAPCommandReader``; a command that needs the store
/// asks the backend and waits; commands pipelined behind it wait their turn.
public struct IMAPSession: LoopSession {
    /// The server's name and limits.
    public struct Configuration: Sendable {
        /// The longest command line, literals aside.
        public var maxLineBytes = 64 * 1024
        /// The largest literal (the message size limit).
        public var maxLiteralBytes = 25 * 1024 * 1024
        /// Seconds before an unauthenticated client is dropped.
        public var loginTimeout = 60
        /// Seconds before an authenticated client is logged out (RFC 9051: at least 30 minutes).
        public var autologoutTimeout = 30 * 60
        /// Whether the connection is plain text (development): logins are refused (LOGINDISABLED).
        public var plaintext = false

        /// The defaults.
        public init() {}
    }

    enum State {
        case notAuthenticated
        case authenticated(account: Int64)
        case selected(account: Int64, Selected)
        case loggedOut
    }

    struct Selected {
        var name: String
        var readOnly: Bool
        var snapshot: IMAPMailboxSnapshot
        /// UIDs this session marked `\Deleted` (the store keeps no such flag): expunged by EXPUNGE or CLOSE.
        var deleted: Set<UInt32> = []
    }

    /// What the command waiting for the backend was.
    enum Pending {
        case login(tag: String)
        case list(ListRequest)
        case status(tag: String, name: String, items: [String])
        case select(tag: String, name: String, readOnly: Bool, qresync: QResync?)
        case refresh(tag: String?, completion: String)
        case fetch(
            tag: String, uid: Bool, messages: [IMAPMessageState], items: [String], changedSince: Int64?,
            summaries: [String: IMAPMessageSummary])
        case search(Search)
        case store(tag: String, uid: Bool, silent: Bool, failed: [UInt32])
        case move(tag: String, moved: [IMAPMessageState])
        case append(tag: String, mailbox: String)
        case copy(tag: String, mailbox: String, copied: [IMAPMessageState])
        case expunge(tag: String?, uids: [UInt32], completion: (() -> [LoopAction<IMAPAnswer>])?)
        case mailboxChange(tag: String, command: String)
    }

    /// Input waiting for its turn.
    enum Queued {
        case command([UInt8])
        case reply(String)
        case bye(String)
    }

    struct QResync {
        var uidValidity: UInt32
        var modseq: Int64
        var known: IMAPSequenceSet?
    }

    let configuration: Configuration
    let backend: any IMAPBackend
    /// The summaries FETCH keeps of messages, shared with the server's other connections.
    let fetchCache: IMAPFetchCache
    private let remoteAddress: String
    private var reader: IMAPCommandReader
    var state = State.notAuthenticated
    var pending: Pending?
    private var queued: [Queued] = []
    private var idleTag: String?
    private var authenticateTag: String?
    var condstore = false
    var qresync = false

    /// A session for a client at `remoteAddress`, keeping what FETCH reads in `fetchCache` (by default its own,
    /// small).
    public init(
        configuration: Configuration, backend: any IMAPBackend, remoteAddress: String = "",
        fetchCache: IMAPFetchCache = IMAPFetchCache(budgetBytes: 1 << 20)
    ) {
        self.configuration = configuration
        self.backend = backend
        self.fetchCache = fetchCache
        self.remoteAddress = remoteAddress
        reader = IMAPCommandReader(
            maxLineBytes: configuration.maxLineBytes, maxLiteralBytes: configuration.maxLiteralBytes)
    }

    /// The capabilities, as the session's state has them.
    var capabilities: String {
        var list = [
            "IMAP4rev1", "IMAP4rev2", "LITERAL+", "SASL-IR", "ID", "ENABLE", "IDLE", "NAMESPACE", "UNSELECT",
            "UIDPLUS", "MOVE", "CONDSTORE", "QRESYNC", "SPECIAL-USE", "LIST-EXTENDED", "ESEARCH", "OBJECTID",
        ]
        if case .notAuthenticated = state {
            list.append(configuration.plaintext ? "LOGINDISABLED" : "AUTH=PLAIN")
        }
        return list.joined(separator: " ")
    }

    package var idleTimeoutMilliseconds: Int {
        if case .notAuthenticated = state { return configuration.loginTimeout * 1000 }
        return configuration.autologoutTimeout * 1000
    }

    // MARK: LoopSession

    package mutating func opened() -> [LoopAction<IMAPAnswer>] {
        [send("* OK [CAPABILITY \(capabilities)] SignalFetch IMAP ready")]
    }

    package mutating func received(_ bytes: UnsafeRawBufferPointer) -> [LoopAction<IMAPAnswer>] {
        // Everything the reader finds waits its turn behind the commands before it, so the answers keep the
        // input's order however the input was cut and whenever the store answers.
        reader.feed(bytes) { event in
            switch event {
            case .command(let bytes): queued.append(.command(bytes))
            case .literalAnnounced: queued.append(.reply("+ Ready for literal data"))
            case .lineTooLong(let tag): queued.append(.reply("\(tag) BAD Command line too long"))
            case .literalTooLarge(let tag, let synchronizing):
                queued.append(
                    synchronizing
                        ? .reply("\(tag) NO [TOOBIG] Literal over the size limit")
                        : .bye("Literal over the size limit"))
            }
        }
        return drainQueue()
    }

    package mutating func answered(_ answer: IMAPAnswer) -> [LoopAction<IMAPAnswer>] {
        guard let pending else { return [] }
        self.pending = nil
        let actions = complete(pending, with: answer)
        return actions + (self.pending == nil ? drainQueue() : [])
    }

    package mutating func notified(_ event: IMAPEvent) -> [LoopAction<IMAPAnswer>] {
        guard idleTag != nil, pending == nil, case .selected = state else { return [] }
        return refresh(tag: nil, completion: "")
    }

    package mutating func timedOut() -> [LoopAction<IMAPAnswer>] {
        state = .loggedOut
        return [send("* BYE Autologout; idle for too long"), .close]
    }

    package func closed(connection: UInt64) {
        backend.unwatch(connection: connection)
    }

    // MARK: Commands

    func send(_ line: String) -> LoopAction<IMAPAnswer> { .send(Array((line + "\r\n").utf8)) }

    /// Runs queued commands until one waits for the backend.
    private mutating func drainQueue() -> [LoopAction<IMAPAnswer>] {
        var actions: [LoopAction<IMAPAnswer>] = []
        while pending == nil, !queued.isEmpty, !isLoggedOut {
            switch queued.removeFirst() {
            case .command(let bytes): actions += handleLine(bytes)
            case .reply(let line): actions.append(send(line))
            case .bye(let reason):
                state = .loggedOut
                actions += [send("* BYE \(reason)"), .close]
            }
        }
        if isLoggedOut { queued = [] }
        return actions
    }

    private var isLoggedOut: Bool {
        if case .loggedOut = state { return true }
        return false
    }

    private mutating func handleLine(_ bytes: [UInt8]) -> [LoopAction<IMAPAnswer>] {
        if let tag = idleTag {
            let line = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard line.uppercased() == "DONE" else { return [send("\(tag) BAD Expected DONE")] }
            idleTag = nil
            return [send("\(tag) OK IDLE terminated")]
        }
        if let tag = authenticateTag {
            authenticateTag = nil
            let line = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if line == "*" { return [send("\(tag) BAD Authentication cancelled")] }
            return plainLogin(tag: tag, base64: line)
        }
        let command: IMAPCommand
        do {
            command = try IMAPCommand.parse(bytes)
        } catch {
            return [send("\(error.tag) BAD \(error.message)")]
        }
        return handle(command)
    }

    private mutating func handle(_ command: IMAPCommand) -> [LoopAction<IMAPAnswer>] {
        let tag = command.tag
        let arguments = command.arguments
        func bad(_ text: String) -> [LoopAction<IMAPAnswer>] { [send("\(tag) BAD \(text)")] }
        switch command.name {
        case "CAPABILITY":
            return [send("* CAPABILITY \(capabilities)"), send("\(tag) OK CAPABILITY completed")]
        case "NOOP", "CHECK":
            guard case .selected = state else { return [send("\(tag) OK \(command.name) completed")] }
            return refresh(tag: tag, completion: "\(command.name) completed")
        case "LOGOUT":
            state = .loggedOut
            return [send("* BYE Logging out"), send("\(tag) OK LOGOUT completed"), .close]
        case "ID":
            return [send("* ID (\"name\" \"SignalFetch\")"), send("\(tag) OK ID completed")]
        default:
            break
        }
        if case .notAuthenticated = state {
            switch command.name {
            case "LOGIN":
                guard !configuration.plaintext else { return [send("\(tag) NO [PRIVACYREQUIRED] Use TLS")] }
                guard arguments.count == 2, let user = arguments[0].text, let password = arguments[1].text else {
                    return bad("LOGIN needs a username and a password")
                }
                return login(tag: tag, username: user, password: password)
            case "AUTHENTICATE":
                guard !configuration.plaintext else { return [send("\(tag) NO [PRIVACYREQUIRED] Use TLS")] }
                guard let mechanism = arguments.first?.text, mechanism.uppercased() == "PLAIN" else {
                    return [send("\(tag) NO Only PLAIN is supported")]
                }
                if arguments.count == 2, let initial = arguments[1].text {
                    return plainLogin(tag: tag, base64: initial)
                }
                authenticateTag = tag
                return [send("+ ")]
            case "STARTTLS":
                return [send("\(tag) NO STARTTLS is not offered: connect with TLS")]
            default:
                return bad("Log in first")
            }
        }
        guard let account = currentAccount else { return bad("Command not valid now") }
        switch command.name {
        case "ENABLE":
            var enabled: [String] = []
            for name in arguments.compactMap(\.text).map({ $0.uppercased() }) {
                if name == "CONDSTORE" {
                    condstore = true
                    enabled.append(name)
                }
                if name == "QRESYNC" {
                    condstore = true
                    qresync = true
                    enabled.append(name)
                }
                if name == "IMAP4REV2" { enabled.append("IMAP4rev2") }
            }
            return [send("* ENABLED" + enabled.map { " " + $0 }.joined()), send("\(tag) OK ENABLE completed")]
        case "NAMESPACE":
            return [send("* NAMESPACE ((\"\" \"/\")) NIL NIL"), send("\(tag) OK NAMESPACE completed")]
        case "LIST", "LSUB":
            guard let request = ListRequest(tag: tag, lsub: command.name == "LSUB", arguments: arguments) else {
                return bad("\(command.name) needs a reference and a pattern")
            }
            if request.patterns == [""] {
                // An empty pattern asks for the hierarchy delimiter and the root (RFC 9051 section 6.3.9).
                return [send("* LIST (\\Noselect) \"/\" \"\""), send("\(tag) OK LIST completed")]
            }
            pending = .list(request)
            let backend = backend
            return [.ask { _, answer in backend.mailboxes(account: account) { answer(.mailboxes($0)) } }]
        case "SUBSCRIBE", "UNSUBSCRIBE":
            return [send("\(tag) OK \(command.name) completed (every mailbox is subscribed)")]
        case "CREATE", "DELETE", "RENAME":
            return changeMailbox(tag: tag, command: command.name, arguments: arguments, account: account)
        case "APPEND":
            return append(tag: tag, arguments: arguments, account: account)
        case "STATUS":
            guard arguments.count == 2, let name = arguments[0].text, case .list(let items) = arguments[1] else {
                return bad("STATUS needs a mailbox and a list of items")
            }
            let names = items.compactMap(\.text).map { $0.uppercased() }
            // Asking for HIGHESTMODSEQ is a CONDSTORE-enabling command (RFC 7162 section 3.1).
            if names.contains("HIGHESTMODSEQ") { condstore = true }
            pending = .status(tag: tag, name: name, items: names)
            let backend = backend
            return [.ask { _, answer in backend.snapshot(account: account, mailbox: name) { answer(.snapshot($0)) } }]
        case "SELECT", "EXAMINE":
            guard let name = arguments.first?.text else { return bad("\(command.name) needs a mailbox") }
            var resync: QResync?
            if arguments.count == 2, case .list(let parameters) = arguments[1] {
                for (index, parameter) in parameters.enumerated() {
                    switch parameter.text?.uppercased() {
                    case "CONDSTORE": condstore = true
                    case "QRESYNC":
                        guard qresync, index + 1 < parameters.count, case .list(let values) = parameters[index + 1],
                            values.count >= 2, let validity = values[0].text.flatMap({ UInt32($0) }),
                            let modseq = values[1].text.flatMap({ Int64($0) })
                        else { return bad("QRESYNC needs ENABLE QRESYNC and (uidvalidity modseq [known-uids])") }
                        resync = QResync(
                            uidValidity: validity, modseq: modseq,
                            known: values.count > 2 ? values[2].text.flatMap(IMAPSequenceSet.init) : nil)
                    default: continue
                    }
                }
            }
            if case .selected = state {
                state = .authenticated(account: account)
            }
            pending = .select(tag: tag, name: name, readOnly: command.name == "EXAMINE", qresync: resync)
            let backend = backend
            return [.ask { _, answer in backend.snapshot(account: account, mailbox: name) { answer(.snapshot($0)) } }]
        case "IDLE":
            idleTag = tag
            return [send("+ idling")]
        default:
            break
        }
        guard case .selected(_, var selected) = state else { return bad("Select a mailbox first") }
        var name = command.name
        var rest = arguments
        var uid = false
        if name == "UID" {
            guard let sub = rest.first?.text?.uppercased() else { return bad("UID needs a command") }
            name = sub
            rest.removeFirst()
            uid = true
        }
        switch name {
        case "FETCH":
            return fetch(tag: tag, uid: uid, arguments: rest, selected: selected)
        case "STORE":
            guard !selected.readOnly else { return [send("\(tag) NO [READ-ONLY] The mailbox is read-only")] }
            return store(tag: tag, uid: uid, arguments: rest, selected: &selected, account: account)
        case "SEARCH":
            return search(tag: tag, uid: uid, arguments: rest, selected: selected)
        case "MOVE":
            guard !selected.readOnly else { return [send("\(tag) NO [READ-ONLY] The mailbox is read-only")] }
            guard rest.count == 2, let set = rest[0].text.flatMap(IMAPSequenceSet.init),
                let target = rest[1].text
            else { return bad("MOVE needs a set and a mailbox") }
            guard Self.validSequence(set, uid: uid, in: selected.snapshot) else {
                return bad("Invalid message sequence number")
            }
            let messages = Self.messages(in: set, uid: uid, of: selected.snapshot)
            guard !messages.isEmpty else { return [send("\(tag) OK MOVE completed (nothing to move)")] }
            pending = .move(tag: tag, moved: messages)
            let backend = backend
            let ids = messages.map(\.id)
            return [.ask { _, answer in backend.move(account: account, ids: ids, to: target) { answer(.moved($0)) } }]
        case "COPY":
            return copy(tag: tag, uid: uid, arguments: rest, selected: selected, account: account)
        case "EXPUNGE":
            guard !selected.readOnly else { return [send("\(tag) NO [READ-ONLY] The mailbox is read-only")] }
            var uids = selected.deleted
            if uid {
                guard let set = rest.first?.text.flatMap(IMAPSequenceSet.init) else {
                    return bad("UID EXPUNGE needs a set")
                }
                let largest = selected.snapshot.messages.last?.uid ?? 0
                uids = uids.filter { set.contains($0, largest: largest) }
            }
            return expunge(tag: tag, uids: Array(uids), account: account, selected: selected, completion: nil)
        case "CLOSE", "UNSELECT":
            state = .authenticated(account: account)
            let done = [send("\(tag) OK \(name) completed")]
            guard name == "CLOSE", !selected.readOnly, !selected.deleted.isEmpty else { return done }
            return expunge(
                tag: nil, uids: Array(selected.deleted), account: account, selected: selected, completion: { done })
        default:
            return bad("Unknown command \(Self.printable(name))")
        }
    }

    var currentAccount: Int64? {
        switch state {
        case .authenticated(let account), .selected(let account, _): account
        default: nil
        }
    }

    /// A client's word in an answer: printable ASCII, at most 32 characters.
    static func printable(_ text: String) -> String {
        String(text.unicodeScalars.filter { $0.value > 0x20 && $0.value < 0x7F }.prefix(32).map(Character.init))
    }

    // MARK: Login

    private mutating func login(tag: String, username: String, password: String) -> [LoopAction<IMAPAnswer>] {
        pending = .login(tag: tag)
        let backend = backend
        let address = remoteAddress
        return [
            .ask { connection, answer in
                backend.login(username: username, password: password, address: address) { result in
                    // Watched from the login on: IDLE and NOOP hear of the account's changes.
                    if case .accepted(let account) = result { backend.watch(account: account, connection: connection) }
                    answer(.login(result))
                }
            }
        ]
    }

    private mutating func plainLogin(tag: String, base64: String) -> [LoopAction<IMAPAnswer>] {
        guard let data = Data(base64Encoded: base64) else { return [send("\(tag) BAD Invalid base64")] }
        // authzid NUL authcid NUL password (RFC 4616); an authzid other than the user is not supported.
        let parts = data.split(separator: 0, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return [send("\(tag) BAD Invalid PLAIN response")] }
        let user = String(decoding: parts[1], as: UTF8.self)
        let authzid = String(decoding: parts[0], as: UTF8.self)
        guard authzid.isEmpty || authzid == user else {
            return [send("\(tag) NO [AUTHORIZATIONFAILED] Acting as another user is not supported")]
        }
        return login(tag: tag, username: user, password: String(decoding: parts[2], as: UTF8.self))
    }

    // MARK: Answers

    private mutating func complete(_ pending: Pending, with answer: IMAPAnswer) -> [LoopAction<IMAPAnswer>] {
        switch (pending, answer) {
        case (.login(let tag), .login(let result)):
            switch result {
            case .accepted(let account):
                state = .authenticated(account: account)
                return [send("\(tag) OK [CAPABILITY \(capabilities)] Logged in")]
            case .rejected: return [send("\(tag) NO [AUTHENTICATIONFAILED] Invalid credentials")]
            case .throttled: return [send("\(tag) NO [UNAVAILABLE] Too many failed logins; try again later")]
            case .unavailable: return [send("\(tag) NO [UNAVAILABLE] The mailbox store is unavailable")]
            }
        case (.list(let request), .mailboxes(let result)):
            let tag = request.tag
            guard case .success(let boxes) = result else { return [failure(tag, result.error)] }
            let verb = request.lsub ? "LSUB" : "LIST"
            var actions: [LoopAction<IMAPAnswer>] = []
            for box in boxes where request.patterns.contains(where: { Self.matches(box.name, pattern: $0) }) {
                if request.specialUseOnly, box.specialUse == nil { continue }
                // Every mailbox is subscribed: `\Subscribed` when the client asked about subscriptions (RFC 5258).
                let children = boxes.contains { $0.name.hasPrefix(box.name + "/") }
                let attributes =
                    [children ? "\\HasChildren" : "\\HasNoChildren"] + (request.tellsSubscribed ? ["\\Subscribed"] : [])
                    + (box.specialUse.map { [$0] } ?? [])
                actions.append(
                    .send(
                        Array("* \(verb) (\(attributes.joined(separator: " "))) \"/\" ".utf8)
                            + IMAPResponse.string(box.name) + [0x0D, 0x0A]))
            }
            return actions + [send("\(tag) OK \(verb) completed")]
        case (.status(let tag, let name, let items), .snapshot(let result)):
            guard case .success(let snapshot) = result else { return [failure(tag, result.error)] }
            var values: [String] = []
            for item in items {
                switch item {
                case "MESSAGES": values.append("MESSAGES \(snapshot.messages.count)")
                case "UNSEEN": values.append("UNSEEN \(snapshot.messages.filter { !$0.seen }.count)")
                case "UIDNEXT": values.append("UIDNEXT \(snapshot.uidNext)")
                case "UIDVALIDITY": values.append("UIDVALIDITY \(snapshot.uidValidity)")
                case "HIGHESTMODSEQ": values.append("HIGHESTMODSEQ \(snapshot.highestModseq)")
                case "RECENT": values.append("RECENT 0")
                case "SIZE", "DELETED": continue
                default: return [send("\(tag) BAD Unknown STATUS item \(Self.printable(item))")]
                }
            }
            return [
                .send(
                    Array("* STATUS ".utf8) + IMAPResponse.string(name)
                        + Array(" (\(values.joined(separator: " ")))\r\n".utf8)),
                send("\(tag) OK STATUS completed"),
            ]
        case (.select(let tag, let name, let readOnly, let resync), .snapshot(let result)):
            guard case .success(let snapshot) = result, let account = currentAccount else {
                return [failure(tag, result.error)]
            }
            state = .selected(account: account, Selected(name: name, readOnly: readOnly, snapshot: snapshot))
            var lines = [
                "* FLAGS (\\Seen \\Flagged \\Answered \\Draft \\Deleted)",
                readOnly
                    ? "* OK [PERMANENTFLAGS ()] Read-only mailbox"
                    : "* OK [PERMANENTFLAGS (\\Seen \\Flagged \\Answered \\Draft \\*)] \\Deleted lasts until the session ends",
                "* \(snapshot.messages.count) EXISTS",
                "* 0 RECENT",
                "* OK [UIDVALIDITY \(snapshot.uidValidity)] UIDs valid",
                "* OK [UIDNEXT \(snapshot.uidNext)] Predicted next UID",
                "* OK [HIGHESTMODSEQ \(snapshot.highestModseq)] Highest",
            ]
            if let resync, resync.uidValidity == snapshot.uidValidity {
                // VANISHED (EARLIER): the known UIDs that are not here any more (RFC 7162 section 3.2.5.1); a client
                // that names none is taken to know every UID below UIDNEXT. The store keeps no UIDs of messages gone,
                // so the answer may name UIDs that never were here, which a client passes over.
                let largest = max(snapshot.uidNext, 1) - 1
                let known = resync.known ?? IMAPSequenceSet("1:*")
                // VANISHED from the gaps between the UIDs, found by halving (no walk); the FETCH lines by a walk that
                // reads each message in place (a copy of each would retain its id and keywords).
                let gone =
                    known.map {
                        $0.subtracting(count: snapshot.messages.count, largest: largest) { snapshot.messages[$0].uid }
                    }
                    ?? []
                if !gone.isEmpty { lines.append("* VANISHED (EARLIER) \(IMAPSequenceSet.write(ranges: gone))") }
                for index in snapshot.messages.indices where snapshot.messages[index].modseq > resync.modseq {
                    lines.append(Self.flagsLine(index + 1, snapshot.messages[index], deleted: false, modseq: true))
                }
                if snapshot.highestModseq > resync.modseq {
                    backend.resynchronized(account: account, since: resync.modseq, reached: snapshot.highestModseq)
                }
            }
            lines.append(
                "\(tag) OK [\(readOnly ? "READ-ONLY" : "READ-WRITE")] \(readOnly ? "EXAMINE" : "SELECT") completed")
            return lines.map(send)
        case (.refresh(let tag, let completion), .delta(let result)):
            switch result {
            case .failure(let error): return tag.map { [failure($0, error)] } ?? []
            case .success(nil): return refresh(tag: tag, completion: completion, whole: true)
            case .success(let delta?):
                var actions = applyDelta(delta)
                if let tag { actions.append(send("\(tag) OK \(completion)")) }
                return actions
            }
        case (.refresh(let tag, let completion), .snapshot(let result)):
            guard case .success(let snapshot) = result else {
                return tag.map { [failure($0, result.error)] } ?? []
            }
            var actions = applyRefresh(snapshot)
            if let tag { actions.append(send("\(tag) OK \(completion)")) }
            return actions
        case (.fetch(let tag, let uid, let messages, let items, let changedSince, let summaries), .contents(let result)):
            guard case .success(let contents) = result else { return [failure(tag, result.error)] }
            return fetchResponses(
                tag: tag, uid: uid, messages: messages, items: items, contents: contents, summaries: summaries,
                changedSince: changedSince)
        case (.search(let search), .contents(let result)):
            guard case .success(let contents) = result else { return [failure(search.tag, result.error)] }
            return searchResponses(search, contents: contents)
        case (.store(let tag, let uid, let silent, let failed), .states(let result)):
            guard case .success(let states) = result else { return [failure(tag, result.error)] }
            var actions: [LoopAction<IMAPAnswer>] = []
            if case (let account, var selected)? = takeSelected() {
                for updated in states {
                    guard let index = Self.index(of: updated.uid, in: selected.snapshot.messages) else { continue }
                    // The message's state, not the mailbox's HIGHESTMODSEQ: that moves only with a delta, so what
                    // others changed before this STORE is still read and told at the next look.
                    selected.snapshot.messages[index] = updated
                    if !silent || condstore {
                        let line = Self.flagsLine(
                            index + 1, updated, deleted: selected.deleted.contains(updated.uid), uid: uid,
                            modseq: condstore)
                        actions.append(send(line))
                    }
                }
                state = .selected(account: account, selected)
            }
            if !failed.isEmpty {
                return actions + [
                    send("\(tag) OK [MODIFIED \(IMAPSequenceSet.write(failed))] Conditional STORE failed")
                ]
            }
            return actions + [send("\(tag) OK STORE completed")]
        case (.move(let tag, let moved), .moved(let result)):
            if case .failure(.noMailbox) = result {
                return [send("\(tag) NO [TRYCREATE] No such mailbox (mailboxes cannot be created here)")]
            }
            guard case .success(let target) = result else { return [failure(tag, result.error)] }
            guard case (let account, var selected)? = takeSelected() else { return [send("\(tag) OK MOVE completed")] }
            var actions: [LoopAction<IMAPAnswer>] = []
            if !target.states.isEmpty {
                // RFC 6851: COPYUID in an untagged OK before the expunges.
                actions.append(
                    send(
                        "* OK [COPYUID \(target.uidValidity) \(IMAPSequenceSet.write(moved.map(\.uid))) "
                            + "\(IMAPSequenceSet.write(target.states.map(\.uid)))] Moved"))
            }
            actions += removeMessages(Set(moved.map(\.uid)), from: &selected)
            state = .selected(account: account, selected)
            return actions + [send("\(tag) OK MOVE completed")]
        case (.append(let tag, let mailbox), .moved(let result)), (.copy(let tag, let mailbox, _), .moved(let result)):
            if case .failure(.noMailbox) = result {
                return [send("\(tag) NO [TRYCREATE] No such mailbox (mailboxes cannot be created here)")]
            }
            guard case .success(let target) = result else { return [failure(tag, result.error)] }
            var code = "APPENDUID \(target.uidValidity) \(IMAPSequenceSet.write(target.states.map(\.uid)))"
            if case .copy(_, _, let copied) = pending {
                code =
                    "COPYUID \(target.uidValidity) \(IMAPSequenceSet.write(copied.map(\.uid))) "
                    + IMAPSequenceSet.write(target.states.map(\.uid))
            }
            let completion = "[\(code)] \(code.hasPrefix("APPEND") ? "APPEND" : "COPY") completed"
            // Into the selected mailbox: the client hears of the new messages (EXISTS) before the tagged OK.
            if case .selected(_, let selected) = state, selected.name.uppercased() == mailbox.uppercased() {
                return refresh(tag: tag, completion: completion)
            }
            return [send("\(tag) OK \(completion)")]
        case (.expunge(let tag, let uids, let completion), .done(let result)):
            if case .failure(let error) = result {
                return tag.map { [failure($0, error)] } ?? (completion?() ?? [])
            }
            var actions: [LoopAction<IMAPAnswer>] = []
            if case (let account, var selected)? = takeSelected() {
                actions += removeMessages(Set(uids), from: &selected)
                state = .selected(account: account, selected)
            }
            if let tag { actions.append(send("\(tag) OK EXPUNGE completed")) }
            return actions + (completion?() ?? [])
        case (.mailboxChange(let tag, let command), .done(let result)):
            guard case .success = result else { return [failure(tag, result.error)] }
            return [send("\(tag) OK \(command) completed")]
        default:
            return []
        }
    }

    func failure(_ tag: String, _ error: IMAPBackendError?) -> LoopAction<IMAPAnswer> {
        switch error {
        case .noMailbox: send("\(tag) NO [NONEXISTENT] No such mailbox")
        case .noMessage: send("\(tag) NO [EXPUNGEISSUEDBEFORE] A message is gone")
        case .unavailable, nil: send("\(tag) NO [UNAVAILABLE] The mailbox store is unavailable; try again")
        case .mailboxExists: send("\(tag) NO [ALREADYEXISTS] A mailbox of that name exists")
        case .roleMailbox: send("\(tag) NO [CANNOT] INBOX, Archive and Trash cannot be renamed or deleted")
        case .invalid(let what): send("\(tag) NO [CANNOT] Invalid \(what)")
        }
    }

    /// CREATE, DELETE and RENAME (RFC 9051 sections 6.3.4 to 6.3.6) of the user's mailboxes.
    private mutating func changeMailbox(
        tag: String, command: String, arguments: [IMAPToken], account: Int64
    ) -> [LoopAction<IMAPAnswer>] {
        // A trailing delimiter only says the name will have children below it (RFC 9051 section 6.3.4).
        let names = arguments.compactMap(\.text).map { $0.hasSuffix("/") && $0.count > 1 ? String($0.dropLast()) : $0 }
        guard names.count == arguments.count, names.count == (command == "RENAME" ? 2 : 1) else {
            return [send("\(tag) BAD \(command) needs \(command == "RENAME" ? "two mailbox names" : "a mailbox name")")]
        }
        pending = .mailboxChange(tag: tag, command: command)
        let backend = backend
        return [
            .ask { _, answer in
                let completion: @Sendable (Result<Void, IMAPBackendError>) -> Void = { answer(.done($0)) }
                switch command {
                case "CREATE": backend.createMailbox(account: account, name: names[0], completion: completion)
                case "DELETE": backend.deleteMailbox(account: account, name: names[0], completion: completion)
                default: backend.renameMailbox(account: account, from: names[0], to: names[1], completion: completion)
                }
            }
        ]
    }

    /// `* n EXPUNGE` (or VANISHED with QRESYNC) for each UID, from the highest sequence number down.
    private func removeMessages(_ uids: Set<UInt32>, from selected: inout Selected) -> [LoopAction<IMAPAnswer>] {
        var actions: [LoopAction<IMAPAnswer>] = []
        if qresync {
            let present = selected.snapshot.messages.map(\.uid).filter { uids.contains($0) }
            if !present.isEmpty { actions.append(send("* VANISHED \(IMAPSequenceSet.write(present))")) }
        } else {
            for index in selected.snapshot.messages.indices.reversed()
            where uids.contains(selected.snapshot.messages[index].uid) {
                actions.append(send("* \(index + 1) EXPUNGE"))
            }
        }
        selected.snapshot.messages.removeAll { uids.contains($0.uid) }
        selected.deleted.subtract(uids)
        return actions
    }

    /// The selected mailbox taken out of `state`, which is left `.authenticated` until the caller puts it back: while
    /// `state` also held the mailbox's arrays, a change to them would copy them whole first (copy on write), work in
    /// proportion to the mailbox for a STORE of one message. Taken out, they change in place.
    private mutating func takeSelected() -> (account: Int64, selected: Selected)? {
        guard case .selected(let account, let selected) = state else { return nil }
        state = .authenticated(account: account)
        return (account, selected)
    }

    /// A fresh snapshot of the selected mailbox: expunges, new messages and flag changes told to the client.
    private mutating func applyRefresh(_ snapshot: IMAPMailboxSnapshot) -> [LoopAction<IMAPAnswer>] {
        guard case (let account, var selected)? = takeSelected() else { return [] }
        let now = Set(snapshot.messages.map(\.uid))
        var actions = removeMessages(Set(selected.snapshot.messages.map(\.uid)).subtracting(now), from: &selected)
        let before = Dictionary(uniqueKeysWithValues: selected.snapshot.messages.map { ($0.uid, $0) })
        if snapshot.messages.count != selected.snapshot.messages.count {
            actions.append(send("* \(snapshot.messages.count) EXISTS"))
        }
        for (index, message) in snapshot.messages.enumerated() {
            guard let old = before[message.uid], old.modseq != message.modseq,
                old.seen != message.seen || old.flagged != message.flagged || old.keywords != message.keywords
            else { continue }
            let deleted = selected.deleted.contains(message.uid)
            actions.append(send(Self.flagsLine(index + 1, message, deleted: deleted, modseq: condstore)))
        }
        selected.snapshot = snapshot
        state = .selected(account: account, selected)
        return actions
    }

    /// Looks at the selected mailbox again: what changed since the HIGHESTMODSEQ the session holds (work in
    /// proportion to the changes), or the whole mailbox when a delta cannot say (`whole`).
    mutating func refresh(tag: String?, completion: String, whole: Bool = false) -> [LoopAction<IMAPAnswer>] {
        guard case .selected(let account, let selected) = state else {
            return tag.map { [send("\($0) OK \(completion)")] } ?? []
        }
        pending = .refresh(tag: tag, completion: completion)
        let (backend, name, since) = (backend, selected.name, selected.snapshot.highestModseq)
        return [
            .ask { _, answer in
                if whole {
                    backend.snapshot(account: account, mailbox: name) { answer(.snapshot($0)) }
                } else {
                    backend.delta(account: account, mailbox: name, since: since) { answer(.delta($0)) }
                }
            }
        ]
    }

    /// Applies what changed since the session's HIGHESTMODSEQ: what left is expunged, new messages counted in one
    /// EXISTS, flag changes told, each found by a binary search of the UIDs, not a walk over the mailbox.
    private mutating func applyDelta(_ delta: IMAPMailboxDelta) -> [LoopAction<IMAPAnswer>] {
        // Taken out of `state` (``takeSelected()``), so a woken connection changes its arrays in place.
        guard case (let account, var selected)? = takeSelected() else { return [] }
        // The steps of IMAPMailboxSnapshot.apply, each told: expunges, then flag changes and new messages.
        let gone = selected.snapshot.uidsLeaving(delta)
        var actions = gone.isEmpty ? [] : removeMessages(gone, from: &selected)
        var updates: [LoopAction<IMAPAnswer>] = []
        var added = false
        for change in delta.changed {
            switch selected.snapshot.upsert(change) {
            case .updated(let index, let old):
                guard old.seen != change.seen || old.flagged != change.flagged || old.keywords != change.keywords else {
                    continue
                }
                let deleted = selected.deleted.contains(change.uid)
                updates.append(send(Self.flagsLine(index + 1, change, deleted: deleted, modseq: condstore)))
            case .inserted:
                added = true
            }
        }
        if added { actions.append(send("* \(selected.snapshot.messages.count) EXISTS")) }
        selected.snapshot.advance(to: delta)
        state = .selected(account: account, selected)
        return actions + updates
    }

    /// `* n FETCH (UID u FLAGS (…) MODSEQ (m))`: a message's flags as told unasked or after a STORE, with its UID
    /// unless `uid` is false and its MODSEQ when `modseq`.
    static func flagsLine(
        _ number: Int, _ message: IMAPMessageState, deleted: Bool, uid: Bool = true, modseq: Bool
    ) -> String {
        let flags = IMAPResponse.flags(message, deleted: deleted)
        return "* \(number) FETCH (" + (uid ? "UID \(message.uid) " : "") + "FLAGS \(flags)"
            + (modseq ? " MODSEQ (\(message.modseq))" : "") + ")"
    }

    /// The index of `uid` in messages sorted by UID.
    static func index(of uid: UInt32, in messages: [IMAPMessageState]) -> Int? {
        var low = 0
        var high = messages.count - 1
        while low <= high {
            let middle = (low + high) / 2
            if messages[middle].uid == uid { return middle }
            if messages[middle].uid < uid { low = middle + 1 } else { high = middle - 1 }
        }
        return nil
    }

    private mutating func expunge(
        tag: String?, uids: [UInt32], account: Int64, selected: Selected,
        completion: (() -> [LoopAction<IMAPAnswer>])?
    ) -> [LoopAction<IMAPAnswer>] {
        let ids = selected.snapshot.messages.filter { uids.contains($0.uid) }.map(\.id)
        guard !ids.isEmpty else {
            return (tag.map { [send("\($0) OK EXPUNGE completed")] } ?? []) + (completion?() ?? [])
        }
        pending = .expunge(tag: tag, uids: uids, completion: completion)
        let backend = backend
        return [.ask { _, answer in backend.expunge(account: account, ids: ids) { answer(.done($0)) } }]
    }

    /// Whether a sequence set names only messages that exist (RFC 9051 section 6.4.8: a sequence number past the
    /// last message is an error; UIDs may name messages that are gone).
    static func validSequence(_ set: IMAPSequenceSet, uid: Bool, in snapshot: IMAPMailboxSnapshot) -> Bool {
        uid || (!snapshot.messages.isEmpty && set.largestNumber.map { $0 <= UInt32(snapshot.messages.count) } ?? true)
    }

    /// The messages of `set` (sequence numbers or UIDs) in the snapshot, in order.
    static func messages(in set: IMAPSequenceSet, uid: Bool, of snapshot: IMAPMailboxSnapshot) -> [IMAPMessageState] {
        if uid {
            let largest = snapshot.messages.last?.uid ?? 0
            return snapshot.messages.filter { set.contains($0.uid, largest: largest) }
        }
        let count = UInt32(snapshot.messages.count)
        return snapshot.messages.enumerated().filter { set.contains(UInt32($0.offset + 1), largest: count) }.map(
            \.element)
    }

    /// LIST's pattern match: `*` matches anything, `%` anything but the hierarchy delimiter; INBOX in any case.
    static func matches(_ name: String, pattern: String) -> Bool {
        let target = name == "INBOX" ? "INBOX" : name
        let pattern = pattern.uppercased() == "INBOX" ? "INBOX" : pattern
        func match(_ n: Substring, _ p: Substring) -> Bool {
            guard let first = p.first else { return n.isEmpty }
            if first == "*" || first == "%" {
                var rest = n
                while true {
                    if match(rest, p.dropFirst()) { return true }
                    guard let next = rest.first, first == "*" || next != "/" else { return false }
                    rest = rest.dropFirst()
                }
            }
            guard let next = n.first, next == first else { return false }
            return match(n.dropFirst(), p.dropFirst())
        }
        return match(Substring(target), Substring(pattern))
    }
}

extension Result {
    var error: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
