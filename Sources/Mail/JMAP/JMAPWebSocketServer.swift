import ConnectionLoop
import Durations
import Foundation
import JSONText
import Locking
import MailboxStore
import WebSocket

/// JMAP over WebSocket (RFC 8887) on a listener of its own (`mailboxd serve --jmap-ws-listen`), one connection loop
/// (STYLE 20) with the API's TLS: each connection reads its opening handshake (``RequestHeadReader``), is
/// authenticated by the API's rules, and becomes a ``JMAPWebSocketSession``. A commit of any instance wakes an
/// account's sockets through ``AccountWakeups`` once, with its new states read once for all of them. An idle socket
/// costs its memory and a ping per interval, nothing per event of other accounts.
public final class JMAPWebSocketServer: Sendable {
    /// Limits and timers.
    public struct Configuration: Sendable, Equatable {
        /// Sockets open at once, over every account.
        public var maxConnections = 10_000
        /// Sockets one account may hold open (a browser's tabs, a phone and a desktop).
        public var maxSocketsPerAccount = 16
        /// How long a socket may be silent before the server pings it; one more interval without an answer closes
        /// it.
        public var pingIntervalMilliseconds = 30_000
        /// How long a connection may take to send its opening handshake.
        public var handshakeTimeoutMilliseconds = 10_000
        /// How often a socket opened with an access token (a bearer token or a ticket made from one) checks that its
        /// session still lives, before it answers or pushes: a session ended on another instance, or by its idle
        /// timeout or lifetime, closes the socket with 1008 within this interval. (An end on this instance closes it
        /// at once: ``JMAPWebSocketServer/sessionEnded(accountID:sessionID:)``.)
        public var reauthorizeIntervalMilliseconds = 30_000

        /// The defaults.
        public init() {}
    }

    /// Who an opening handshake is from, by the API's rules (a ticket, a bearer token or Basic credentials), and the
    /// API's URL prefix for its answers; or the HTTP refusal.
    package typealias Authenticator =
        @Sendable (_ head: RequestHead, _ remoteAddress: String) async -> Result<
            (account: JMAPAccount, baseURL: String), WebSocketHandshake.Refusal
        >
    /// Whether the session a socket's account reference came from (``JMAPAccount/sessionID``) still lives; `nil` when
    /// that cannot be told now (the store is down: the socket stays open and asks again later).
    package typealias Reauthorizer = @Sendable (_ account: JMAPAccount) async -> Bool?

    private struct AccountSockets {
        var connections: Set<UInt64> = []
        /// The ``AccountWakeups`` subscription that wakes them.
        var subscription = 0
        /// The newest states read after a commit, for every socket of the account (one read each commit).
        var states: TypeStates?
        /// The last StateChange written, for the sockets that were told the same states before it.
        var lastChange: (from: Int64, to: Int64, types: Set<String>?, text: [UInt8])?
        /// Counts the times commits may have been missed (the LISTEN made again, a read failed): a socket that saw
        /// fewer reads its states again, even if the event reached it while it waited for the store.
        var missed = 0
    }

    private struct State {
        var running = false
        var accounts: [Int64: AccountSockets] = [:]
        var accountOf: [UInt64: Int64] = [:]
        /// The session of each socket opened with an access token.
        var sessionOf: [UInt64: Int64] = [:]
    }

    /// The subprotocol RFC 8887 §3 registers.
    public static let subprotocol = "jmap"

    let server: JMAPServer
    let wakeups: AccountWakeups
    let authenticate: Authenticator
    let reauthorize: Reauthorizer
    /// The limits and timers.
    public let configuration: Configuration
    /// The bound port.
    public let port: UInt16
    private let listener: Int32
    private let tls: ServerTLSContext?
    private let loop: ConnectionLoop<JMAPWebSocketSession>
    private let state = LockedValue(State())
    private let finished = DispatchGroup()
    /// What the loop's sessions reach this server through; emptied at shutdown, so loop and server do not keep each
    /// other.
    private let sessionsHub = LockedValue<JMAPWebSocketServer?>(nil)

    /// Serves on `listener` (bound to `port`, listening; closed by ``shutdown()``), TLS with `tls` (plain without), for
    /// `server`'s accounts, woken by `wakeups`; ``start()`` begins serving.
    package init(
        listener: Int32, port: UInt16, tls: ServerTLSContext?, server: JMAPServer, wakeups: AccountWakeups,
        configuration: Configuration = Configuration(), authenticate: @escaping Authenticator,
        reauthorize: @escaping Reauthorizer = { _ in true }
    ) throws(JMAPWebSocketServerError) {
        self.server = server
        self.wakeups = wakeups
        self.authenticate = authenticate
        self.reauthorize = reauthorize
        self.configuration = configuration
        self.listener = listener
        self.port = port
        self.tls = tls
        let maxMessage = server.limits.maxSizeRequest
        let hub = sessionsHub
        do {
            loop = try ConnectionLoop(
                listener: listener, tls: tls, maxConnections: configuration.maxConnections,
                refusal: "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            ) { address in
                JMAPWebSocketSession(
                    codec: WebSocketCodec(maxMessageBytes: maxMessage), remoteAddress: address,
                    hub: hub.withLock { $0! })
            }
        } catch {
            throw JMAPWebSocketServerError(description: "jmap-ws: \(error.reason)")
        }
        sessionsHub.withLock { $0 = self }
    }

    /// Reads the certificate and key files again and serves them to new sockets; open ones keep theirs. Throws, and
    /// serves what it served, when they cannot be used.
    public func reloadTLS() throws(JMAPWebSocketServerError) {
        do {
            try tls?.reload()
        } catch {
            throw JMAPWebSocketServerError(description: "jmap-ws: \(error.description)")
        }
    }

    /// Starts serving (once).
    public func start() {
        guard
            state.withLock({ state in
                defer { state.running = true }
                return !state.running
            })
        else { return }
        finished.enter()
        Thread.start(named: "jmap-ws", stackSize: 8 << 20) { [loop, finished] in
            loop.run()
            finished.leave()
        }
    }

    /// Closes every socket, each with a Close 1001 (going away) when its client answers within a second, and stops.
    public func shutdown() {
        let (running, open) = state.withLock { ($0.running, Array($0.accountOf.keys)) }
        if running {
            loop.notify(open, .goingAway)
            let deadline = ContinuousClock.now + .seconds(1)
            while count > 0, ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.01) }
            loop.stop()
            finished.wait()
        } else {
            loop.closeInbox()
        }
        close(listener)
        sessionsHub.withLock { $0 = nil }
    }

    /// The sockets open now.
    public var count: Int { state.withLock { $0.accountOf.count } }

    /// Counts connection `id` as `account`'s socket; false when the account holds its most.
    func register(_ id: UInt64, account: JMAPAccount) -> Bool {
        state.withLock { state in
            guard (state.accounts[account.id]?.connections.count ?? 0) < configuration.maxSocketsPerAccount else {
                return false
            }
            state.accountOf[id] = account.id
            if let session = account.sessionID { state.sessionOf[id] = session }
            if state.accounts[account.id] == nil {
                let accountID = account.id
                let subscription = wakeups.subscribe(accountID: accountID) { [weak self] wakeup in
                    self?.wake(accountID: accountID, wakeup)
                }
                state.accounts[accountID] = AccountSockets(subscription: subscription)
            }
            state.accounts[account.id]?.connections.insert(id)
            return true
        }
    }

    /// The account's states after commits, read once for its sockets and its event streams (``AccountWakeups``):
    /// kept, and every socket is told to look; no socket reads for itself. After changes may have been missed, or when
    /// the states could not be read, each socket reads the store's (``missedCount(accountID:)``).
    private func wake(accountID: Int64, _ wakeup: AccountWakeups.Wakeup) {
        switch wakeup {
        case .states(let states, let afterMiss):
            let newer = state.withLock { state -> Bool in
                guard let kept = state.accounts[accountID]?.states?.modseq, kept >= states.modseq else {
                    state.accounts[accountID]?.states = states
                    return true
                }
                return false
            }
            if newer || afterMiss { tell(accountID, missed: afterMiss) }
        case .unread: tell(accountID, missed: true)
        }
    }

    /// A session ended here (signed out, or the account signed out everywhere when `sessionID` is `nil`): each socket
    /// opened with its token closes with 1008 at once. Sockets opened with the password stay.
    public func sessionEnded(accountID: Int64, sessionID: Int64?) {
        let ended = state.withLock { state in
            (state.accounts[accountID]?.connections ?? []).filter { id in
                guard let session = state.sessionOf[id] else { return false }
                return sessionID == nil || session == sessionID
            }
        }
        loop.notify(ended, .sessionEnded)
    }

    /// How many times commits to `accountID` may have been missed since its first socket opened.
    func missedCount(accountID: Int64) -> Int { state.withLock { $0.accounts[accountID]?.missed ?? 0 } }

    /// Tells every socket of the account to look: at the states kept, and, when commits may have been `missed`, at
    /// the store's (each socket compares ``missedCount(accountID:)`` with what it saw).
    private func tell(_ accountID: Int64, missed: Bool) {
        let connections = state.withLock { state -> Set<UInt64> in
            if missed { state.accounts[accountID]?.missed += 1 }
            return state.accounts[accountID]?.connections ?? []
        }
        loop.notify(connections, .look)
    }

    /// The newest states read after a commit to `accountID`, when there was one since its first socket opened.
    func latestStates(accountID: Int64) -> TypeStates? { state.withLock { $0.accounts[accountID]?.states } }

    /// The StateChange text from the states at modseq `from` to `states` for `types`, made once for every socket of
    /// the account that was told the same (`make` writes it when it is not kept).
    func stateChange(
        accountID: Int64, from: Int64, to states: TypeStates, types: Set<String>?, make: () -> [UInt8]?
    ) -> [UInt8]? {
        if let kept = state.withLock({ $0.accounts[accountID]?.lastChange }), kept.from == from,
            kept.to == states.modseq, kept.types == types
        {
            return kept.text
        }
        guard let text = make() else { return nil }
        state.withLock { $0.accounts[accountID]?.lastChange = (from, states.modseq, types, text) }
        return text
    }

    /// A connection closed (loop thread).
    func closed(_ id: UInt64) {
        let ended = state.withLock { state -> (Int64, Int)? in
            state.sessionOf[id] = nil
            guard let accountID = state.accountOf.removeValue(forKey: id) else { return nil }
            state.accounts[accountID]?.connections.remove(id)
            guard let sockets = state.accounts[accountID], sockets.connections.isEmpty else { return nil }
            state.accounts[accountID] = nil
            return (accountID, sockets.subscription)
        }
        if let (accountID, subscription) = ended { wakeups.unsubscribe(subscription, accountID: accountID) }
    }
}

/// Why the WebSocket listener could not start.
public struct JMAPWebSocketServerError: Error, CustomStringConvertible, Sendable {
    /// What failed.
    public var description: String

    /// An error saying what failed.
    public init(description: String) { self.description = description }
}

/// One JMAP WebSocket (RFC 8887 §4): text messages in, Responses, RequestErrors and StateChanges out, in the order
/// the requests came. A request goes to the backend and the socket reads nothing more until it is answered; up to
/// `maxConcurrentRequests` messages that arrived together wait their turn, and one more is refused with a `limit`
/// RequestError. Push, once enabled, reads the account's state after a commit and tells what changed.
struct JMAPWebSocketSession: LoopSession {
    enum Answer: Sendable {
        /// Who the opening handshake is from (the connection is counted as theirs), or its refusal.
        case authenticated(Result<(account: JMAPAccount, baseURL: String), WebSocketHandshake.Refusal>)
        /// A Response or RequestError, written.
        case response([UInt8])
        /// The account's states, for push (`nil`: the read failed).
        case states(TypeStates?)
        /// Whether the socket's session still lives (`nil`: it could not be told).
        case reauthorized(Bool?)
    }

    enum Event: Sendable {
        /// The account's states moved (the new ones are the hub's ``JMAPWebSocketServer/latestStates(accountID:)``),
        /// or commits may have been missed (its ``JMAPWebSocketServer/missedCount(accountID:)`` grew).
        case look
        /// The server is shutting down.
        case goingAway
        /// The session the socket was opened with ended on this instance.
        case sessionEnded
    }

    /// What push is on for: the types, and the states last told (`nil` until the first read, which is made when push
    /// is turned on).
    struct Push {
        var types: Set<String>?
        var told: TypeStates?
        /// The `pushState` the client gave when enabling push.
        var clientState: String?
        /// The hub's count of missed commits when this socket last read (``JMAPWebSocketServer/missedCount``): a
        /// socket that saw fewer reads the store's states again.
        var missedSeen = 0
        /// The last read failed: the next is made on the next event or ping, not at once.
        var readFailed = false
    }

    /// Before the `101`: the head being read, then the `Sec-WebSocket-Accept` while the backend authenticates.
    enum Phase {
        case handshake(RequestHeadReader)
        case authenticating(accept: String)
        case open(account: JMAPAccount, baseURL: String)
        case refused
    }

    let codec: WebSocketCodec
    let remoteAddress: String
    let hub: JMAPWebSocketServer
    var phase: Phase = .handshake(RequestHeadReader())
    /// Frames that came with the head, read once the socket is open.
    var early: [UInt8] = []
    /// When the connection opened (monotonic nanoseconds): the head must be whole within the handshake timeout of
    /// it, however slowly its bytes come.
    let openedAt = MonotonicTime.nanoseconds()
    /// Text messages that arrived and wait for the one before them to be answered.
    var waiting: [[UInt8]] = []
    var push: Push?
    var pingSent = false
    /// When the socket's session was last known to live (monotonic nanoseconds), and whether that is being asked.
    var authorizedAt = MonotonicTime.nanoseconds()
    var reauthorizing = false

    init(codec: WebSocketCodec, remoteAddress: String, hub: JMAPWebSocketServer) {
        self.codec = codec
        self.remoteAddress = remoteAddress
        self.hub = hub
    }

    var idleTimeoutMilliseconds: Int {
        if case .open = phase { return hub.configuration.pingIntervalMilliseconds }
        return hub.configuration.handshakeTimeoutMilliseconds
    }

    var account: JMAPAccount? {
        if case .open(let account, _) = phase { return account }
        return nil
    }

    mutating func opened() -> [LoopAction<Answer>] { [] }

    mutating func received(_ bytes: UnsafeRawBufferPointer) -> [LoopAction<Answer>] {
        switch phase {
        case .handshake(let reader): return readHead(reader, bytes)
        case .authenticating, .refused: return []
        case .open: break
        }
        pingSent = false
        for message in codec.receive(bytes) {
            switch message {
            case .text(let text) where waiting.count < hub.server.limits.maxConcurrentRequests:
                waiting.append(text)
            case .text(let text):
                let id: String? =
                    if case .success(.request(let id, _)) = JMAPWebSocketMessage.parse(text) { id } else { nil }
                let error = JMAPRequestError(
                    type: "limit", detail: "Too many requests are waiting on this socket.",
                    limit: "maxConcurrentRequests")
                codec.send(text: JMAPWebSocketError(requestID: id, error).message.jsonBytes)
            case .binary:
                codec.close(code: 1003, reason: "JMAP messages are text frames.")
            case .close:
                break  // wslay answered it
            }
        }
        return proceed()
    }

    mutating func answered(_ answer: Answer) -> [LoopAction<Answer>] {
        switch answer {
        case .authenticated(.failure(let refusal)):
            return refuse(refusal)
        case .authenticated(.success(let (account, baseURL))):
            guard case .authenticating(let accept) = phase else { return [.close] }
            phase = .open(account: account, baseURL: baseURL)
            var actions: [LoopAction<Answer>] = [
                .send(
                    WebSocketHandshake.switchingProtocols(accept: accept, subprotocol: JMAPWebSocketServer.subprotocol))
            ]
            if !early.isEmpty {
                let bytes = early
                early = []
                actions += bytes.withUnsafeBytes { received($0) }
            }
            return actions
        case .response(let bytes):
            codec.send(text: bytes)
        case .states(let states):
            if let states {
                tell(states)
            } else {
                push?.readFailed = true
            }
        case .reauthorized(let lives):
            reauthorizing = false
            switch lives {
            case true?: authorizedAt = MonotonicTime.nanoseconds()
            case false?: return sessionEnded()
            case nil: break  // asked again at the next request, push or ping
            }
        }
        return proceed()
    }

    mutating func notified(_ event: Event) -> [LoopAction<Answer>] {
        guard case .open = phase else { return [] }
        push?.readFailed = false
        switch event {
        case .goingAway: codec.close(code: 1001, reason: "The server is shutting down.")
        case .sessionEnded: return sessionEnded()
        case .look: break
        }
        return proceed()
    }

    mutating func timedOut() -> [LoopAction<Answer>] {
        guard case .open = phase else { return [.close] }
        if pingSent || codec.closeSent { return flushed() + [.close] }
        push?.readFailed = false
        pingSent = true
        codec.sendPing()
        return proceed()
    }

    func closed(connection: UInt64) { hub.closed(connection) }

    /// Closes with 1008 (policy violation, RFC 6455 section 7.4.1): the token the socket was opened with no longer
    /// signs anyone in. What was waiting is not answered.
    private mutating func sessionEnded() -> [LoopAction<Answer>] {
        waiting = []
        push = nil
        codec.close(code: 1008, reason: "The session ended; sign in again.")
        return flushed() + (codec.isFinished ? [.close] : [])
    }

    /// Reads the opening handshake; once it is whole and well formed, asks who it is from.
    private mutating func readHead(_ reader: RequestHeadReader, _ bytes: UnsafeRawBufferPointer) -> [LoopAction<Answer>]
    {
        switch reader.feed(bytes) {
        case .incomplete:
            let limit = UInt64(hub.configuration.handshakeTimeoutMilliseconds) * 1_000_000
            guard MonotonicTime.nanoseconds() &- openedAt <= limit else {
                return refuse(.init(status: 408, code: "requestTimeout", message: "The request head took too long."))
            }
            return []
        case .tooLarge:
            return refuse(.init(status: 431, code: "headTooLarge", message: "The request head is larger than 8 KiB."))
        case .invalid(let reason):
            return refuse(.init(status: 400, code: "malformedRequest", message: reason))
        case .complete(let head, let rest):
            guard head.path == "/jmap/ws" else {
                return refuse(.init(status: 404, code: "notFound", message: "This listener serves /jmap/ws only."))
            }
            guard head.method == "GET" else {
                return refuse(
                    .init(
                        status: 405, code: "methodNotAllowed", message: "A WebSocket is opened with GET.",
                        headers: [("Allow", "GET")]))
            }
            let accept: String
            switch WebSocketHandshake.accept(header: head.header, subprotocol: JMAPWebSocketServer.subprotocol) {
            case .success(let value): accept = value
            case .failure(let refusal): return refuse(refusal)
            }
            early = rest
            phase = .authenticating(accept: accept)
            let (hub, address) = (hub, remoteAddress)
            return [
                .ask { connection, answer in
                    Task {
                        var outcome = await hub.authenticate(head, address)
                        if case .success(let (account, _)) = outcome, !hub.register(connection, account: account) {
                            outcome = .failure(
                                .init(
                                    status: 429, code: "tooManySockets",
                                    message:
                                        "This account holds its most WebSockets (\(hub.configuration.maxSocketsPerAccount)); close one first."
                                ))
                        }
                        answer(.authenticated(outcome))
                    }
                }
            ]
        }
    }

    /// Answers the handshake with an HTTP refusal and closes.
    private mutating func refuse(_ refusal: WebSocketHandshake.Refusal) -> [LoopAction<Answer>] {
        phase = .refused
        return [.send(WebSocketHandshake.response(to: refusal)), .close]
    }

    /// Handles waiting messages until one needs the backend, then push's read if one is due; the output goes first.
    private mutating func proceed() -> [LoopAction<Answer>] {
        var question: LoopAction<Answer>?
        if !codec.closeSent, !reauthorizing, let account, account.sessionID != nil,
            MonotonicTime.nanoseconds() &- authorizedAt
                > UInt64(hub.configuration.reauthorizeIntervalMilliseconds) * 1_000_000
        {
            // Nothing is answered or pushed until the session is known to live.
            reauthorizing = true
            let reauthorize = hub.reauthorize
            question = .ask { _, answer in Task { answer(.reauthorized(await reauthorize(account))) } }
        }
        while question == nil, !reauthorizing, !codec.closeSent, !waiting.isEmpty {
            switch JMAPWebSocketMessage.parse(waiting.removeFirst()) {
            case .failure(let error):
                codec.send(text: error.message.jsonBytes)
            case .success(.request(let id, let value)):
                question = ask(request: value, id: id)
            case .success(.pushEnable(let types, let pushState)):
                push = Push(types: types, told: nil, clientState: pushState)
            case .success(.pushDisable):
                push = nil
            }
        }
        if question == nil, !reauthorizing, !codec.closeSent, let push, let account {
            if !push.readFailed, push.told == nil || push.missedSeen != hub.missedCount(accountID: account.id) {
                question = askStates()
            } else if let told = push.told, let latest = hub.latestStates(accountID: account.id),
                latest.modseq > told.modseq
            {
                tell(latest)
            }
        }
        var actions = flushed()
        if codec.isFinished { return actions + [.close] }
        if let question { actions.append(question) }
        return actions
    }

    /// The frames the codec queued, as a send.
    private func flushed() -> [LoopAction<Answer>] {
        let output = codec.takeOutput()
        return output.isEmpty ? [] : [.send(output)]
    }

    private func ask(request: JSONValue, id: String?) -> LoopAction<Answer> {
        guard case .open(let account, let baseURL) = phase else { return .close }
        let server = hub.server
        return .ask { _, answer in
            Task(executorPreference: server.taskExecutor) {
                let message: JSONValue
                switch await server.handle(request: request, account: account, baseURL: baseURL) {
                case .success(.object(var members)):
                    members["@type"] = "Response"
                    if let id { members["requestId"] = .string(id) }
                    message = .object(members)
                case .success(let other):
                    message = other
                case .failure(let error):
                    message = JMAPWebSocketError(requestID: id, error).message
                }
                answer(.response(message.jsonBytes))
            }
        }
    }

    /// Reads the account's states for this socket alone: when push is turned on, and after commits of other
    /// instances may have been missed. (After a commit, the hub reads them once for every socket.)
    private mutating func askStates() -> LoopAction<Answer> {
        let (server, accountID) = (hub.server, account?.id ?? -1)
        push?.missedSeen = hub.missedCount(accountID: accountID)
        return .ask { _, answer in
            Task { answer(.states(try? await server.typeStates(accountID: accountID))) }
        }
    }

    /// Push's answer: the first read is the baseline (told at once only if the client's `pushState` is behind it);
    /// each later one tells the types whose state moved.
    private mutating func tell(_ states: TypeStates) {
        guard var push, let account else { return }
        let pushState = SyncState(epoch: hub.server.store.epoch, modseq: states.modseq).description
        let told = push.told
        if told == nil || states.modseq > told?.modseq ?? .min { push.told = states }
        self.push = push
        let types = push.types
        func text(_ changed: [String: String]) -> [UInt8]? {
            guard case .object(var members)? = JMAPServer.stateChange(changed, account: account, types: types) else {
                return nil
            }
            members["pushState"] = .string(pushState)
            return JSONValue.object(members).jsonBytes
        }
        let message: [UInt8]?
        if let told {
            guard states.modseq > told.modseq else { return }
            message = hub.stateChange(accountID: account.id, from: told.modseq, to: states, types: types) {
                text(states.states.filter { told.states[$0.key] != $0.value })
            }
        } else {
            message = push.clientState.map { $0 != pushState } == true ? text(states.states) : nil
        }
        if let message { codec.send(text: message) }
    }
}
