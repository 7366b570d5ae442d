import Console
import Foundation
import HTTPServer
import MailIngest
import MailboxHTTPAPI
import MailboxStore
import Push
import ServiceMetrics
import SignalDispatch

/// The running mailbox service: the store, the HTTPS API and the signal dispatcher, wired together.
public final class MailboxService: Sendable {
    /// The store.
    public let store: MailboxStore
    /// The metrics registry served at `/metrics`.
    public let metrics: Metrics
    /// The dispatcher.
    public let dispatcher: SignalDispatcher
    private let server: HTTPServer
    private let metricsServer: HTTPServer?
    private let lmtp: LMTPServer?
    private let maintenance: Task<Void, Never>
    /// Wakes the dispatcher after any commit that queued signals (this process's or, on PostgreSQL, another's).
    private let queuedSignals: QueuedSignalWatch

    /// The port the API listens on.
    public var port: UInt16 { server.port }
    /// The port `/metrics` is served on, when it is.
    public var metricsPort: UInt16? { metricsServer?.port }
    /// The port the LMTP listener is bound to, when there is one.
    public var lmtpPort: UInt16? { lmtp?.port }

    /// Opens the store, starts the API server and the dispatcher.
    public init(
        configuration: ServiceConfiguration, router: PushRouter,
        dispatcherConfiguration: SignalDispatcher.Configuration = .init(),
        log: @escaping @Sendable (String) -> Void = { _ in }
    ) throws {
        try FileManager.default.createDirectory(atPath: configuration.dataDirectory, withIntermediateDirectories: true)
        let store = try MailboxStore(database: configuration.storeDatabase, configuration: configuration.store)
        let metrics = Metrics()
        router.share(in: store)
        let console = configuration.consoleToken.map { _ in ConsoleFeed(store: store, metrics: metrics) }
        let dispatcher = SignalDispatcher(
            store: store, router: router, metrics: metrics, configuration: dispatcherConfiguration, log: log,
            report: { report in console?.report(report) })
        var settings = MailboxAPI.Settings(deliveryToken: configuration.deliveryToken)
        settings.inlineBodyLimit = configuration.inlineBodyLimit
        settings.signIn = configuration.signIn
        settings.deviceRegistrationsPerHour = configuration.deviceRegistrationsPerHour
        settings.webPushPublicKey = configuration.webPushPublicKey
        settings.consoleToken = configuration.consoleToken
        let api = MailboxAPI(store: store, configuration: settings, metrics: metrics, push: router, console: console)
        var serverConfiguration = HTTPServer.Configuration()
        serverConfiguration.host = configuration.host
        serverConfiguration.port = configuration.port
        serverConfiguration.maxBodySize = configuration.maxBodySize
        serverConfiguration.connectionLimit = configuration.connectionLimit
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
        let lmtp = try configuration.lmtp.map { lmtpConfiguration in
            try LMTPServer(
                configuration: lmtpConfiguration,
                backend: LMTPDelivery(store: store, metrics: metrics), log: log)
        }
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
            self.server = try HTTPServer(configuration: serverConfiguration, router: api.router)
        } catch {
            lmtp?.shutdown()  // a metrics server already started stops as it is released
            throw error
        }
        self.metricsServer = metricsServer
        self.lmtp = lmtp
        lmtp?.start()
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
                try? await Task.sleep(for: .seconds(3600))
            }
        }
        dispatcher.start()
    }

    /// Stops the LMTP listener and the API (finishing in-flight requests), then the dispatcher.
    public func shutdown() async {
        if let lmtp {
            // Its shutdown waits for the sessions' threads: off the cooperative pool, which their stores need.
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                Thread {
                    lmtp.shutdown()
                    done.resume()
                }.start()
            }
        }
        await server.shutdown()
        await metricsServer?.shutdown()
        await dispatcher.stop()
        maintenance.cancel()
        queuedSignals.cancel()
    }
}
