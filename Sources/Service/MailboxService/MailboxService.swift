import ConnectionLoop
import Console
import Durations
import Foundation
import HTTPServer
import IMAP
import JMAP
import Locking
import LoopEvents
import MailIngest
import MailboxHTTPAPI
import MailboxStore
import Push
import ServiceMetrics
import SignalDispatch
import Tracing

/// The running mailbox service: the store, the HTTPS API and the signal dispatcher, wired together.
public final class MailboxService: Sendable {
    /// The store.
    public let store: MailboxStore
    /// The metrics registry served at `/metrics`.
    public let metrics: Metrics
    /// The dispatcher.
    public let dispatcher: SignalDispatcher
    private let server: HTTPServer
    let api: MailboxAPI
    private let metricsServer: HTTPServer?
    private let lmtp: LMTPServer?
    private let imap: IMAPServer?
    /// JMAP's WebSockets, stopped after the API.
    private let jmapWebSockets: JMAPWebSocketServer?
    private let maintenance: Task<Void, Never>
    /// Wakes the dispatcher after any commit that queued signals (this process's or, on PostgreSQL, another's).
    private let queuedSignals: QueuedSignalWatch
    /// Tells JMAP push subscriptions of this process's commits, when a push service can carry them (Web Push).
    private let jmapPush: JMAPPushNotifier?
    /// The push services, which a reload replaces.
    private let router: PushRouter
    /// Makes each change's trace, when traces are exported (`--otlp-endpoint`).
    private let tracer: ChangeTracer?

    /// The port the API listens on.
    public var port: UInt16 { server.port }
    /// The port `/metrics` is served on, when it is.
    public var metricsPort: UInt16? { metricsServer?.port }
    /// The port the LMTP listener is bound to, when there is one.
    public var lmtpPort: UInt16? { lmtp?.port }
    /// The port the IMAP listener is bound to, when there is one.
    public var imapPort: UInt16? { imap?.port }
    /// The port the JMAP WebSocket listener is bound to, when there is one.
    public var jmapWebSocketPort: UInt16? { jmapWebSockets?.port }

    /// Opens the store on `clock` (unless `store` is one already open, see ``openStore(configuration:clock:log:)``),
    /// starts the API server and the dispatcher.
    public init(
        configuration: ServiceConfiguration, router: PushRouter,
        dispatcherConfiguration: SignalDispatcher.Configuration = .init(), store: MailboxStore? = nil,
        clock: any WallClock = SystemClock(), log: @escaping @Sendable (String) -> Void = { _ in }
    ) throws {
        try FileManager.default.createDirectory(atPath: configuration.dataDirectory, withIntermediateDirectories: true)
        let store =
            try store
            ?? MailboxStore(database: configuration.storeDatabase, configuration: configuration.store, clock: clock)
        let metrics = Metrics()
        router.share(in: store)
        let feed = LoopFeed(store: store)
        let console = configuration.consoleToken.map { _ in ConsoleFeed(store: store, metrics: metrics) }
        if let console { feed.add(console) }
        let tracer = configuration.tracing.map { tracing in
            var tracing = tracing
            tracing.instanceID = store.instanceID
            return ChangeTracer(
                epoch: store.epoch,
                exporter: SpanExporter(configuration: tracing, metrics: metrics, log: log),
                now: { store.currentTime })
        }
        if let tracer { feed.add(tracer) }
        self.tracer = tracer
        self.router = router
        let dispatcher = SignalDispatcher(
            store: store, router: router, metrics: metrics, configuration: dispatcherConfiguration, log: log,
            report: { report in feed.signalled(report) })
        var settings = MailboxAPI.Settings(deliveryToken: configuration.deliveryToken)
        settings.inlineBodyLimit = configuration.inlineBodyLimit
        settings.signIn = configuration.signIn
        settings.deviceRegistrationsPerHour = configuration.deviceRegistrationsPerHour
        settings.webPushPublicKey = configuration.webPushPublicKey
        settings.consoleToken = configuration.consoleToken
        settings.servesTLS = configuration.tlsCertificatePath != nil
        settings.jmapBaseURL = configuration.jmapBaseURL
        var pushConfiguration = JMAPPushNotifier.Configuration()
        pushConfiguration.allowsUnencrypted = configuration.jmapPushAllowsUnencrypted
        let jmapPush = router.subscriptionService.map { _ in
            JMAPPushNotifier(
                store: store, services: { router.subscriptionService }, configuration: pushConfiguration, log: log)
        }
        settings.jmapPush = jmapPush
        // Bodies past half the listener's limit get JMAP's own `limit` error; past the whole, the listener's 413.
        settings.jmapLimits.maxSizeRequest = min(settings.jmapLimits.maxSizeRequest, configuration.maxBodySize / 2)
        let serverConfiguration = Self.apiServerConfiguration(configuration, log: log)
        let lmtp = try configuration.lmtp.map { lmtpConfiguration in
            try LMTPServer(
                configuration: lmtpConfiguration,
                backend: LMTPDelivery(store: store, metrics: metrics, feed: feed), log: log)
        }
        let imap: IMAPServer?
        do {
            imap = try configuration.imap.map { imapConfiguration in
                let backend = IMAPStoreBackend(store: store, signIn: configuration.signIn, feed: feed)
                let server = try IMAPServer(configuration: imapConfiguration, backend: backend)
                backend.tell { [weak server] connections in server?.notify(connections) }
                return server
            }
        } catch {
            lmtp?.shutdown()
            throw error
        }
        // The WebSocket listener is bound before the API is made: the Session names its port.
        var webSocketListener: (socket: Int32, port: UInt16)?
        if let listen = configuration.jmapWebSocket {
            do {
                webSocketListener = try ListeningSocket.bind(host: listen.host, port: listen.port)
            } catch {
                lmtp?.shutdown()
                imap?.shutdown()
                throw JMAPWebSocketServerError(description: "jmap-ws: \(error.description)")
            }
            settings.jmapWebSocketPort = webSocketListener?.port
        }
        let api = MailboxAPI(
            store: store, configuration: settings, metrics: metrics, push: router, console: console, feed: feed)
        var metricsServer: HTTPServer?
        do {
            if let host = configuration.metricsHost {
                var metricsConfiguration = HTTPServer.Configuration()
                metricsConfiguration.host = host
                metricsConfiguration.port = configuration.metricsPort
                metricsConfiguration.connectionLimit = 64
                metricsConfiguration.threadCount = 1
                metricsConfiguration.errorLog = serverConfiguration.errorLog
                metricsServer = try HTTPServer(configuration: metricsConfiguration, router: api.metricsRouter)
            }
            let server = try HTTPServer(configuration: serverConfiguration, router: api.router)
            self.server = server
            jmapWebSockets = try configuration.jmapWebSocket.map { listen in
                var tls: ServerTLSContext?
                if let files = listen.tls {
                    do {
                        tls = try ServerTLSContext(
                            certificate: files.certificate, privateKey: files.privateKey,
                            minimumVersion: listen.minimumTLSVersion)
                    } catch {
                        throw JMAPWebSocketServerError(description: "jmap-ws: \(error)")
                    }
                }
                return try JMAPWebSocketServer(
                    listener: webSocketListener!.socket, port: webSocketListener!.port, tls: tls, server: api.jmap,
                    wakeups: api.jmapWakeups, configuration: listen.limits,
                    authenticate: api.jmapWebSocketAuthenticator(apiPort: server.port),
                    reauthorize: api.jmapWebSocketReauthorizer())
            }
            if let sockets = jmapWebSockets {
                api.sessionEndWatchers.withLock {
                    $0.append { [weak sockets] account, session in
                        sockets?.sessionEnded(accountID: account, sessionID: session)
                    }
                }
            }
        } catch {
            lmtp?.shutdown()  // a metrics server already started stops as it is released
            imap?.shutdown()
            if let socket = webSocketListener?.socket { close(socket) }
            throw error
        }
        self.metricsServer = metricsServer
        self.api = api
        self.lmtp = lmtp
        self.imap = imap
        self.jmapPush = jmapPush
        lmtp?.start()
        imap?.start()
        jmapWebSockets?.start()
        self.store = store
        self.metrics = metrics
        self.dispatcher = dispatcher
        queuedSignals = store.watchQueuedSignals { dispatcher.wake() }
        // Hourly housekeeping: discard expired tombstones.
        self.maintenance = Task {
            while !Task.isCancelled {
                _ = try? await store.purgeTombstones()
                _ = try? await store.purgeEvents(olderThan: 86_400)
                _ = try? await store.purgeSessions(olderThan: 86_400)
                _ = try? await store.purgePushSubscriptions()
                try? await Task.sleep(for: .seconds(3600))
            }
        }
        dispatcher.start()
        tracer?.start()
    }

    /// The API listener's settings: address, limits, TLS, logs.
    static func apiServerConfiguration(
        _ configuration: ServiceConfiguration, log: @escaping @Sendable (String) -> Void
    ) -> HTTPServer.Configuration {
        var serverConfiguration = HTTPServer.Configuration()
        serverConfiguration.host = configuration.host
        serverConfiguration.port = configuration.port
        serverConfiguration.maxBodySize = configuration.maxBodySize
        serverConfiguration.connectionLimit = configuration.connectionLimit
        // libmicrohttpd's pool per connection holds a request's head (up to about 15 KB here; a larger one is
        // refused) and the answer's buffers. A held event stream keeps its pool touched, so it is sized for the API's
        // requests and no larger: 32 KiB cost each held stream about 9 KiB more.
        serverConfiguration.connectionMemoryLimit = 16 * 1024
        if let certificate = configuration.tlsCertificatePath, let key = configuration.tlsKeyPath {
            serverConfiguration.tls = .init(
                certificatePath: certificate, privateKeyPath: key, minimumVersion: configuration.tlsMinimumVersion)
        }
        if let accessLog = configuration.accessLog {
            serverConfiguration.accessLog = { entry in
                var entry = entry
                entry.path = MailboxAPI.loggablePath(entry.path)
                accessLog(entry.description)
            }
        }
        serverConfiguration.errorLog = { message in log("http: \(message)") }
        return serverConfiguration
    }

    /// Opens the store, reading the time from `clock`. A shared database that cannot be reached yet (a cluster with
    /// no primary, a server still starting) is not a reason to exit: the API listener answers every request 503
    /// `storageUnavailable` (so `/healthz` tells a load balancer to wait) while the store is tried again with the one
    /// backoff (full jitter under 1 s, 2 s, 4 s … at most 30 s, so instances restarted together do not knock
    /// together). Any other failure (a schema from a newer build, a bad SQLite file) is thrown at once.
    public static func openStore(
        configuration: ServiceConfiguration, clock: any WallClock = SystemClock(),
        log: @escaping @Sendable (String) -> Void
    ) async throws -> MailboxStore {
        let backoff = Backoff(base: 1, maximum: 30, minimum: 0.25)
        var attempt = 0
        var waiting: HTTPServer?
        while true {
            do {
                let store = try MailboxStore(
                    database: configuration.storeDatabase, configuration: configuration.store, clock: clock)
                if let waiting {
                    await waiting.shutdown()
                    log("mailboxd: the database answers; starting")
                }
                return store
            } catch MailboxStoreError.storage(let failure)
                where failure.isUnavailable && configuration.storeDatabase.isShared
            {
                if waiting == nil {
                    waiting = try HTTPServer(configuration: apiServerConfiguration(configuration, log: log)) { _ in
                        throw HTTPError(
                            .serviceUnavailable, code: "storageUnavailable",
                            message: "The service is starting: its database is not reachable yet. Try again later.",
                            headers: ["Retry-After": "5"])
                    }
                }
                attempt += 1
                let delay = backoff.delay(attempt: attempt, retryAfter: nil)
                log(
                    "mailboxd: the database \(configuration.storeDatabase) is unavailable (\(failure.code): "
                        + "\(failure.message)); answering 503 meanwhile, trying again in \(String(format: "%.1f", delay)) s"
                )
                try await Task.sleep(for: .seconds(delay))
            }
        }
    }

    /// Reloads what can change while the service runs: the TLS certificate and key of every listener (the API, IMAP,
    /// JMAP's WebSockets), read again from their files; when given, the delivery token; and when given, the push
    /// services read again from their configuration (apps added or removed, APNs and FCM keys rotated, the VAPID key
    /// replaced, with `webPushPublicKey` its public half). New connections get the new certificate; connections
    /// already open keep theirs. New signals go through the new push services; a send already under way finishes
    /// on the old one, which is closed a minute later. A part that cannot be used keeps what it had and is named in
    /// the failures; the others still take. `refused`: parts the caller could not read (they count as failures too).
    /// Counted in `mailboxd_reloads_total{outcome}`.
    public func reload(
        deliveryToken: String?, push: (services: [any PushService], webPushPublicKey: String?)? = nil,
        refused: [String] = []
    ) -> (reloaded: [String], failures: [String]) {
        var reloaded: [String] = []
        var failures = refused
        func attempt(_ part: String, _ body: () throws -> Void) {
            do {
                try body()
                reloaded.append(part)
            } catch {
                failures.append("\(part): \(error)")
            }
        }
        if server.configuration.tls != nil { attempt("the API's certificate") { try server.reloadTLS() } }
        if let imap { attempt("IMAP's certificate") { try imap.reloadTLS() } }
        if let jmapWebSockets { attempt("the JMAP WebSocket certificate") { try jmapWebSockets.reloadTLS() } }
        if let deliveryToken {
            api.replaceDeliveryToken(deliveryToken)
            reloaded.append("the delivery token")
        }
        if let push {
            for service in push.services { service.share(in: store) }
            let replaced = router.replace(with: push.services)
            api.replaceWebPushPublicKey(push.webPushPublicKey)
            Task {
                try? await Task.sleep(for: Self.replacedServiceGrace)
                for service in replaced { service.shutdown() }
            }
            reloaded.append("the push configuration (\(push.services.map(\.name.rawValue).joined(separator: ", ")))")
        }
        metrics.increment(
            "mailboxd_reloads_total", labels: "outcome=\"\(failures.isEmpty ? "applied" : "refused")\"",
            help:
                "Reloads (SIGHUP) by outcome: applied, or refused in part (what could not be used kept its old value).")
        return (reloaded, failures)
    }

    /// How long push services a reload replaced stay open for the sends that began on them.
    static let replacedServiceGrace: Duration = .seconds(60)

    /// Stops the LMTP listener and the API (finishing in-flight requests), then the dispatcher.
    public func shutdown() async {
        if let lmtp {
            // Its shutdown waits for the deliveries its sessions handed to the store: off the cooperative pool, which a
            // recipient lookup needs.
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                Thread.start(named: "lmtp-shutdown") {
                    lmtp.shutdown()
                    done.resume()
                }
            }
        }
        if let imap {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                Thread.start(named: "imap-shutdown") {
                    imap.shutdown()
                    done.resume()
                }
            }
        }
        if let sockets = jmapWebSockets {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                Thread.start(named: "jmap-ws-shutdown") {
                    sockets.shutdown()
                    done.resume()
                }
            }
        }
        await server.shutdown()
        await metricsServer?.shutdown()
        await dispatcher.stop()
        maintenance.cancel()
        queuedSignals.cancel()
        jmapPush?.shutdown()
        await tracer?.shutdown()
    }
}
