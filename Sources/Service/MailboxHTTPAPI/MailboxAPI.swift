import Console
import Durations
import Foundation
import HTTPServer
import JMAP
import Locking
import LoopEvents
import MailboxStore
import OpenSSLCrypto
import Push
import ServiceMetrics
import SignalDispatch

/// The `/v1` HTTP API of the mailbox service (see `docs/openapi.yaml`), plus `/healthz` and the web client at
/// `/web/`; `/metrics` is served on a listener of its own (``metricsRouter``).
package struct MailboxAPI: Sendable {
    /// What the API's behaviour depends on, from the service's configuration.
    package struct Settings: Sendable {
        /// The token senders present on `POST /v1/deliveries`.
        package var deliveryToken: String
        /// Message bodies up to this many bytes are inline in listings and changes.
        package var inlineBodyLimit = 16_384
        /// How failed sign-ins are counted and slowed (see ``LoginThrottle``).
        package var signIn = SignInLimits()
        /// Device registrations (new or refreshed) one account may make per hour; one more is 429.
        package var deviceRegistrationsPerHour = 60
        /// The VAPID public key browsers subscribe with (base64url of the 65-byte point), when Web Push is on.
        package var webPushPublicKey: String?
        /// The console token (`/console` is served only with one).
        package var consoleToken: String?
        /// Whether the listener serves TLS: the JMAP Session's URLs are `https://` then.
        package var servesTLS = false
        /// The JMAP Session's URL prefix (`https://mail.example.com`); `nil`: the scheme and the request's `Host`.
        package var jmapBaseURL: String?
        /// What JMAP advertises and enforces.
        package var jmapLimits = JMAPLimits()
        /// What tells JMAP push subscriptions of changes; `nil`: they cannot be made.
        package var jmapPush: JMAPPushNotifier?
        /// The port of the JMAP WebSocket listener, when there is one (the Session names it).
        package var jmapWebSocketPort: UInt16?

        /// Settings with the defaults.
        package init(deliveryToken: String) { self.deliveryToken = deliveryToken }
    }

    let store: MailboxStore
    let configuration: Settings
    let metrics: Metrics
    let throttle: LoginThrottle
    /// The SHA-256 of the delivery token; presented tokens are hashed and compared in constant time.
    /// The delivery token's SHA-256 (``replaceDeliveryToken(_:)`` changes it while the API runs).
    let deliveryTokenHash: LockedValue<[UInt8]>
    /// The push services devices can register with.
    let push: PushRouter
    /// The console's events, when the console is on.
    let console: ConsoleFeed?
    /// Who may open the console.
    let consoleAccess: ConsoleAccess?
    /// The loop's feed (the console's and the tracer's), told of each delivery's arrival and each fetch.
    let feed: LoopFeed?
    /// JMAP's methods over the store.
    package let jmap: JMAPServer
    /// Wakes JMAP event streams and WebSockets after this process's commits.
    package let jmapWakeups: AccountWakeups
    /// The JMAP event streams open here.
    package let jmapEventStreams: JMAPEventStreams
    /// The tickets that open a WebSocket from a browser.
    let jmapTickets = WebSocketTickets()
    /// Told when a session ends here (signed out; `nil`: every session of the account), so what it holds open
    /// closes at once: the JMAP WebSocket listener's ``JMAPWebSocketServer/sessionEnded(accountID:sessionID:)``.
    package let sessionEndWatchers = LockedValue<[@Sendable (_ accountID: Int64, _ sessionID: Int64?) -> Void]>([])

    package init(
        store: MailboxStore, configuration: Settings, metrics: Metrics, push: PushRouter, console: ConsoleFeed? = nil,
        feed: LoopFeed? = nil
    ) {
        self.feed = feed
        self.console = configuration.consoleToken == nil ? nil : console
        consoleAccess = configuration.consoleToken.map(ConsoleAccess.init(token:))
        self.store = store
        self.configuration = configuration
        self.metrics = metrics
        self.push = push
        deliveryTokenHash = LockedValue(SHA256.hash(configuration.deliveryToken))
        throttle = LoginThrottle(store: store, limits: configuration.signIn)
        jmap = JMAPServer(
            store: store, limits: configuration.jmapLimits, push: configuration.jmapPush,
            applicationServerKey: configuration.webPushPublicKey, webSocketPort: configuration.jmapWebSocketPort)
        let server = jmap
        jmapWakeups = AccountWakeups(store: store) { accountID in try await server.typeStates(accountID: accountID) }
        jmapEventStreams = JMAPEventStreams(wakeups: jmapWakeups, jmap: jmap, epoch: store.epoch)
    }

    package var router: Router {
        var router = Router()
        router.use(RequestMetrics(metrics: metrics))
        router.use(StoreErrors())
        router.post("/v1/session", handler: createSession)
        router.delete("/v1/session", handler: authenticated(deleteSession))
        router.delete("/v1/sessions", handler: authenticated(deleteAllSessions))
        router.get("/v1/mailboxes", handler: authenticated(listMailboxes))
        router.get("/v1/messages", handler: authenticated(listMessages))
        router.get("/v1/messages/:id", handler: authenticated(getMessage))
        router.get("/v1/messages/:id/raw", handler: authenticated(getRawMessage))
        router.get(
            "/v1/messages/:id/parts/:partId",
            handler: authenticated(getMessagePart))
        router.patch("/v1/messages/:id", handler: authenticated(patchMessage))
        router.delete("/v1/messages/:id", handler: authenticated(deleteMessage))
        router.get("/v1/changes", handler: authenticated(changes))
        router.post("/v1/devices", handler: authenticated(registerDevice))
        router.delete("/v1/devices/:id", handler: authenticated(deleteDevice))
        router.get(
            "/v1/webpush/vapid-public-key", handler: vapidPublicKey)
        // Inline where it measured better (docs/measurements.md, "CPU per message"): on SQLite it cuts an eighth of a
        // delivery's CPU, freshness unchanged. On PostgreSQL the work mostly moved to libmicrohttpd's thread, and
        // freshness measured worse, so there the async handler answers.
        if case .sqlite = store.database {
            router.add(.post, "/v1/deliveries", inline: deliver)
        } else {
            router.post("/v1/deliveries", handler: deliver)
        }
        router.get("/web", handler: webFile)
        router.get("/web/:file", handler: webFile)
        router.get("/healthz", handler: health)
        addConsoleRoutes(to: &router)
        addJMAPRoutes(to: &router)
        return router
    }

    /// The metrics listener's routes: `/metrics` (Prometheus's text format), kept off the API's listener.
    package var metricsRouter: Router {
        var router = Router()
        router.get("/metrics", handler: metricsPage)
        return router
    }

    // MARK: - Plumbing

    /// `path` as the access log may show it: a device's id or push-service token (`/v1/devices/{id}`, where an
    /// APNs token may stand for the id) is replaced by `{id}`; every other path is kept.
    package static func loggablePath(_ path: String) -> String {
        let prefix = "/v1/devices/"
        guard path.hasPrefix(prefix), path.count > prefix.count else { return path }
        return prefix + "{id}"
    }

    typealias AuthenticatedHandler = @Sendable (HTTPRequest, SessionRecord) async throws -> HTTPResponse

    static func httpError(for error: MailboxStoreError) -> HTTPError {
        switch error {
        case .notFound: return .notFound("No such resource for this account.")
        case .usernameTaken: return HTTPError(.conflict, code: "usernameTaken", message: "The username is taken.")
        case .tooManyDevices:
            return HTTPError(
                .conflict, code: "tooManyDevices",
                message: "This account has the most devices allowed; remove one (DELETE /v1/devices/{id}) first.")
        case .invalidArgument(let what):
            return HTTPError(.badRequest, code: "invalidArgument", message: "Invalid \(what).")
        case .malformedState:
            return HTTPError(.badRequest, code: "invalidState", message: "The state string is malformed.")
        case .mailboxExists:
            return HTTPError(.conflict, code: "mailboxExists", message: "A mailbox of that name exists.")
        case .mailboxHasMessages:
            return HTTPError(.conflict, code: "mailboxHasMessages", message: "The mailbox holds messages.")
        case .roleMailbox:
            return HTTPError(
                .forbidden, code: "roleMailbox", message: "The inbox, archive and trash cannot be renamed or destroyed."
            )
        case .cannotCalculateChanges:
            return HTTPError(
                .badRequest, code: "cannotCalculateChanges",
                message: "Changes cannot be calculated from that state; resynchronize fully.")
        case .storage(let failure) where !failure.isUnavailable:
            return HTTPError(.internalServerError, code: "internalError", message: "An internal error occurred.")
        case .storage, .schemaTooNew:
            return HTTPError(
                .serviceUnavailable, code: "storageUnavailable",
                message: "Storage is temporarily unavailable; nothing was changed. Try again later.",
                headers: ["Retry-After": "5"])
        }
    }

    func authenticated(_ handler: @escaping AuthenticatedHandler) -> HTTPHandler {
        { [store] request in
            guard let token = request.bearerToken, !token.isEmpty, token.utf8.count <= 256 else {
                throw HTTPError.unauthorized("A bearer token is required.")
            }
            // Where the store's reads are calls, not thread hops: the session's and the handler's (a device's sync).
            return try await withTaskExecutorPreference(store.readExecutor) {
                guard let session = try await store.session(tokenHash: SHA256.hash(token)) else {
                    throw HTTPError.unauthorized("The token is invalid or revoked.")
                }
                var response = try await handler(request, session)
                response.headers.replaceOrAdd(name: "Cache-Control", value: "no-store")
                return response
            }
        }
    }

    /// Decodes a JSON object body, refusing fields outside `allowed` (a typo must not be silently ignored).
    func decode<T: Decodable>(_ type: T.Type, from request: HTTPRequest, allowed: Set<String>) throws -> T {
        try request.decodeJSON(type, allowedFields: allowed)
    }

    func messageJSON(_ record: MessageRecord) -> MessageJSON {
        MessageJSON(record, includeBody: record.size <= configuration.inlineBodyLimit)
    }

    func limit(
        _ request: HTTPRequest, _ name: String, default defaultValue: Int, range: ClosedRange<Int>
    ) throws
        -> Int
    {
        guard let text = request.query(name) else { return defaultValue }
        let digits = (1...9).contains(text.utf8.count) && text.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
        guard digits, let value = Int(text), range.contains(value) else {
            throw HTTPError(
                .badRequest, code: "invalidArgument",
                message: "'\(name)' must be an integer from \(range.lowerBound) to \(range.upperBound).")
        }
        return value
    }
}

extension MailboxAPI {
    /// Tells ``sessionEndWatchers`` that a session (`nil`: every session of the account) ended here.
    func sessionsEnded(accountID: Int64, sessionID: Int64?) {
        for watcher in sessionEndWatchers.withLock({ $0 }) { watcher(accountID, sessionID) }
    }

    /// Takes `token` as the delivery token from now on (a reload); requests made with the old one are refused.
    package func replaceDeliveryToken(_ token: String) {
        let hash = SHA256.hash(token)
        deliveryTokenHash.withLock { $0 = hash }
    }

    /// Answers `key` at `GET /v1/webpush/vapid-public-key` and advertises it in JMAP's Session from now on (a
    /// reload replaced the VAPID key).
    package func replaceWebPushPublicKey(_ key: String?) { jmap.replaceApplicationServerKey(key) }
}
