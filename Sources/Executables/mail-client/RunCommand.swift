import CommandLineSupport
import Durations
import Foundation
import HTTPClient
import MailSync
import MailSyncHTTP
import MailSyncIMAP
import MailSyncSQLite
import OpenSSLCrypto
import ServerSentEvents

enum RunCommand {
    static let usage = """
        usage: mail-client run --server URL [--ca PEM] --sim URL --username U --state-dir DIR [options]

        A simulated device: registers with apns-sim (fcm-sim with --service fcm, webpush-sim with --service
        webpush; with --service unifiedpush, an Android app whose distributor is webpush-sim --distributor ntfy),
        logs in to mailboxd (password on standard input),
        registers its device token, holds the notification stream and syncs on launch, on each signal and on
        a fallback timer. With --live it also holds the server's event stream while running and syncs on each
        change at once (pushes still wake it when that stream is down). Prints one JSON object per line, each
        with an "event" key:
          registered {deviceToken, service, alias, signalKey}
          signal {apnsId, pushType, priority, collapseId, payload} (fcm: {service, messageId, priority,
                  collapseKey, payload}; webpush: {service, bodyBytes, ttl, urgency, topic, payload}, the
                  payload decrypted with the device's own subscription keys)
          badge {badge}                     sync-start {trigger, full}
          sync-done {state, messages, created, updated, destroyed, ms, trigger, full, pages, result, outcome}
          sync-skipped {trigger, state}     stream {state: connected} (the server's: {state, source: server})
          error {code, message}             exit {reason}
        A trigger is launch, signal, timer, manual or (with --live) change.

        \(flags.help)
        Every flag may also come from MAIL_CLIENT_<FLAG> (e.g. MAIL_CLIENT_FALLBACK_INTERVAL).
        SIGTERM or SIGINT unregisters the device, logs out and exits 0.
        """

    /// Every flag `run` takes, in the order its help lists them.
    static let flags =
        ServerOptions.flags
        + FlagTable(
            column: 26,
            [
                Flag(
                    "service", "S",
                    help: "apns (default), fcm, webpush or unifiedpush: the push service the device is",
                    "reached through (unifiedpush: a distributor's Web Push endpoint)"),
                Flag("sim", "URL", help: "the simulator's device-side base URL, e.g. http://127.0.0.1:2198"),
                Flag(
                    "app", "PACKAGE",
                    help: "with --service fcm: the Android package (default: com.example.signalfetch)"),
                Flag("fcm-project", "ID", help: "with --service fcm: the Firebase project (default: signalfetch-dev)"),
                Flag("sim-ca", "PEM", help: "CA for an https --sim (default: --ca)"),
                Flag("username", "U", help: "account to log in as"),
                Flag("state-dir", "DIR", help: "folder for the local cache (created when missing)"),
            ])
        + DeviceOptions.pushTarget
        + FlagTable(
            column: 26, [Flag("device-name", "N", help: "session and device name (default: mail-client)")])
        + DeviceOptions.syncSchedule
        + FlagTable(
            column: 26,
            [
                Flag(
                    switch: "live",
                    help: "while running, hold the server's event stream (JMAP event source) and sync on",
                    "each change at once; pushes still wake the device when the stream is down"),
                Flag(
                    "fetch", "api|imap",
                    help: "what a sync fetches over: /v1 delta sync (default), or IMAP with QRESYNC, as a",
                    "mail app does after its signal (the API still logs in and registers the device)"),
                Flag(
                    "imap", "HOST:PORT",
                    help: "with --fetch imap: the server's IMAPS address (its certificate checked with --ca)"),
                Flag(switch: "once", help: "no push: sync once, print the events and exit (status 0 when complete)"),
                Flag("until-messages", "N", help: "exit 0 after a complete sync leaves N messages in the cache"),
                Flag("until-state", "STATE", help: "exit 0 after a complete sync reaches STATE"),
                Flag(
                    "timeout", "S",
                    help: "exit after S seconds: status 3 with an error event when an --until-…",
                    "condition was not met, else status 0"),
            ])

    /// What a device's syncs fetch over when `--fetch imap` says so (`nil`: the API, through its own transport).
    static func fetchTransport(
        _ arguments: Arguments, server: ServerOptions, username: String, password: String
    ) throws -> (any MailTransport)? {
        switch arguments.string("fetch", default: "api") {
        case "api":
            guard arguments.string("imap") == nil else { throw UsageError("--imap goes with --fetch imap") }
            return nil
        case "imap":
            let address = try HostPort(parsing: try arguments.required("imap"))
            guard let ca = server.ca else { throw UsageError("--fetch imap needs --ca (the server's CA)") }
            return IMAPMailTransport(
                configuration: .init(
                    host: address.host, port: address.port, caFile: ca, username: username, password: password))
        default:
            throw UsageError("--fetch must be api or imap")
        }
    }

    static func cachePath(_ stateDirectory: String) -> String {
        URL(fileURLWithPath: stateDirectory).appendingPathComponent("cache.sqlite").path
    }

    static func main(_ argv: [String]) async throws {
        let arguments = try parse(argv, usage: usage, flags: flags)
        let server = try ServerOptions(arguments)
        let once = arguments.flag("once")
        let options = Options(
            username: try arguments.required("username"),
            stateDirectory: try arguments.required("state-dir"),
            sim: once ? arguments.string("sim") : try arguments.required("sim"),
            simCA: arguments.string("sim-ca") ?? server.ca,
            topic: arguments.string("topic", default: "com.example.signalfetch"),
            environment: arguments.string("environment", default: "sandbox"),
            deviceName: arguments.string("device-name", default: "mail-client"),
            fallbackInterval: try arguments.double("fallback-interval", default: 300),
            signalDeadline: try arguments.double("signal-deadline", default: 25),
            pageSize: try arguments.int("page-size", default: 100),
            once: once,
            live: arguments.flag("live"),
            untilMessages: try arguments.string("until-messages").map { _ in
                try arguments.int("until-messages", default: 0)
            },
            untilState: arguments.string("until-state"),
            timeout: try arguments.string("timeout").map { _ in try arguments.double("timeout", default: 0) },
            service: arguments.string("service", default: "apns"),
            app: arguments.string("app", default: "com.example.signalfetch"),
            fcmProject: arguments.string("fcm-project", default: "signalfetch-dev"))
        guard ["apns", "fcm", "webpush", "unifiedpush"].contains(options.service) else {
            throw UsageError("--service must be apns, fcm, webpush or unifiedpush")
        }
        guard ["sandbox", "production"].contains(options.environment) else {
            throw UsageError("--environment must be sandbox or production")
        }
        guard !(options.once && options.live) else {
            throw UsageError("--live holds a stream: it cannot go with --once")
        }
        guard options.pageSize > 0, options.signalDeadline > 0, options.fallbackInterval >= 0 else {
            throw UsageError("--page-size and --signal-deadline must be positive, --fallback-interval not negative")
        }
        let password = try readPassword()
        try FileManager.default.createDirectory(atPath: options.stateDirectory, withIntermediateDirectories: true)
        let cache = try SQLiteMailCache(path: cachePath(options.stateDirectory))
        let transport = try server.makeTransport()
        let kind = try options.simulatorKind(transport: transport)
        let device = options.sim.map { sim in
            SimulatorDevice(
                baseURL: sim,
                client: HTTPClient(
                    configuration: .init(
                        httpVersion: .http1, tls: TLSConfiguration(caFile: options.simCA), requestTimeout: .seconds(30))
                ), kind: kind)
        }
        let fetchTransport = try fetchTransport(
            arguments, server: server, username: options.username, password: password)
        let client = DeviceClient(
            options: options, password: password, cache: cache, transport: transport, device: device,
            fetchTransport: fetchTransport)
        ShutdownSignals.shared.onShutdown { await client.shutDown() }
        try await client.run()
    }

    struct Options: Sendable {
        var username: String
        var stateDirectory: String
        var sim: String?
        var simCA: String?
        var topic: String
        var environment: String
        var deviceName: String
        var fallbackInterval: Double
        var signalDeadline: Double
        var pageSize: Int
        var once: Bool
        /// Holds the server's event stream while running and syncs on each change at once.
        var live: Bool
        var untilMessages: Int?
        var untilState: String?
        var timeout: Double?
        var service: String
        var app: String
        var fcmProject: String

        /// What the device registers as with its simulator; a Web Push device asks `transport`'s server for its
        /// VAPID key. A UnifiedPush app is a Web Push device to the server: its distributor's endpoint and its own
        /// keys, the subscription made at the distributor (webpush-sim in distributor mode).
        func simulatorKind(transport: MailAPIClient) throws -> SimulatorDevice.Kind {
            switch service {
            case "fcm": return .fcm(app: app, project: fcmProject)
            case "webpush", "unifiedpush":
                return .webpush(try WebPushReceiver { try await transport.vapidPublicKey() })
            default: return .apns(topic: topic, environment: environment)
            }
        }
    }
}

/// The running simulated device: its registrations, its sync engine and its notification stream.
actor DeviceClient {
    typealias Options = RunCommand.Options

    let options: Options
    let password: String
    let cache: SQLiteMailCache
    let transport: MailAPIClient
    let device: SimulatorDevice?
    /// What syncs fetch over when it is not the API (`--fetch imap`).
    let fetchTransport: (any MailTransport)?
    private var engine: SyncEngine?
    /// The server's event stream, followed with --live.
    private var live: LiveSync?
    /// How many times a stream refused with 401 was reopened while syncing still worked (bounded: see
    /// `streamUnauthorized`).
    private var streamRenewals = 0
    private var deviceToken: String?
    /// The simulator's registration (its token, and a Web Push subscription's endpoint).
    private var simulatorRegistration: SimulatorDevice.Registration?
    /// The server's id of the registration (what unregistering names).
    private var deviceID: String?
    /// Compares signals' tags with the local state's, under the registration's signal key.
    private var tagger: SignalTagger?
    private var reloginAttempted = false

    init(
        options: Options, password: String, cache: SQLiteMailCache, transport: MailAPIClient,
        device: SimulatorDevice?, fetchTransport: (any MailTransport)? = nil
    ) {
        self.options = options
        self.password = password
        self.cache = cache
        self.transport = transport
        self.device = device
        self.fetchTransport = fetchTransport
    }

    /// Registers, logs in and syncs, then holds the notification stream (and with --live the server's event
    /// stream). `started` is called once the device is registered and its engine running (before the streams are
    /// held).
    func run(started: @Sendable () async -> Void = {}) async throws {
        if let timeout = options.timeout { startTimeout(timeout) }
        if let device, !options.once {
            let registration = try await registerDevice(device)
            simulatorRegistration = registration
            deviceToken = registration.token
        }
        try await login()
        if let registration = simulatorRegistration { try await registerWithServer(registration) }
        let configuration = SyncEngine.Configuration(
            signalDeadline: .milliseconds(Int(options.signalDeadline * 1000)), changesPageSize: options.pageSize,
            fallbackInterval: options.once || options.fallbackInterval == 0
                ? nil : .milliseconds(Int(options.fallbackInterval * 1000)))
        let engine = try SyncEngine(transport: fetchTransport ?? transport, cache: cache, configuration: configuration)
        await engine.useSignalTagger(tagger)
        self.engine = engine
        let printer = Task { await self.printEvents(engine) }
        if options.once {
            let report = await engine.sync(.launch)
            for _ in 0..<200 where syncsPrinted == 0 { try? await Task.sleep(for: .milliseconds(10)) }
            printer.cancel()
            try? await transport.logout()
            exit(report.outcome == .completed ? 0 : 1)
        }
        await engine.start()
        if options.live {
            let live = LiveSync(transport: transport, engine: engine)
            self.live = live
            Task { await self.printEvents(live) }
            await live.start()
        }
        await started()
        if let device {
            await holdSignalStream(device)
        }
    }

    // MARK: - Registration

    private func registerDevice(_ device: SimulatorDevice) async throws -> SimulatorDevice.Registration {
        do {
            return try await withStartupRetries("device registration") { try await device.register() }
        } catch {
            fail(error, context: "device registration failed")
        }
    }

    private func login() async throws {
        let transport = self.transport
        let (username, password, deviceName) = (options.username, self.password, options.deviceName)
        let session: MailSession
        do {
            session = try await withStartupRetries("login") {
                try await transport.login(username: username, password: password, deviceName: deviceName)
            }
        } catch {
            fail(error, context: "login failed")
        }
        if try cache.bind(toAccount: session.accountId) {
            EventOutput.emit("cache-reset", [("reason", .string("the cache held another account"))])
        }
    }

    private func registerWithServer(_ simulator: SimulatorDevice.Registration) async throws {
        let transport = self.transport
        guard let device else { return }
        let token = simulator.token
        let registration: DeviceRegistration
        do {
            registration = try await withStartupRetries("device registration with the server") {
                try await device.registerWithServer(simulator, transport: transport)
            }
        } catch {
            fail(error, context: "device registration with the server failed")
        }
        deviceID = registration.id
        tagger = registration.signalKey.flatMap { key in
            SignalTagger(signalKey: key) { key, message in HMACSHA256.authenticationCode(for: message, key: key) }
        }
        await engine?.useSignalTagger(tagger)
        EventOutput.emit(
            "registered",
            [
                ("deviceToken", .string(token)), ("service", .string(options.service)),
                ("alias", registration.alias.map(EventField.string) ?? .null),
                // The device's own key, printed for the drills that check what its signals named; never sent to a
                // push service.
                ("signalKey", registration.signalKey.map(EventField.string) ?? .null),
            ])
    }

    // MARK: - Signals

    private func holdSignalStream(_ device: SimulatorDevice) async {
        var delay = Duration.milliseconds(500)
        while !Task.isCancelled {
            guard let token = deviceToken else { return }
            do {
                let response = try await device.notifications(token: token)
                EventOutput.emit("stream", [("state", .string("connected"))])
                delay = .milliseconds(500)
                for try await event in response.body.serverSentEvents {
                    handle(event)
                }
                EventOutput.error("signalStreamLost", "the notification stream ended; reconnecting")
            } catch let failure as SimulatorDevice.Failure where failure.status == 404 || failure.status == 410 {
                EventOutput.error("deviceUnknown", "the push simulator no longer knows the device; registering again")
                do {
                    let registration = try await registerDevice(device)
                    simulatorRegistration = registration
                    deviceToken = registration.token
                    try await registerWithServer(registration)
                    continue
                } catch {
                    EventOutput.error("registration", "\(error)")
                }
            } catch {
                EventOutput.error("signalStreamLost", "\(error); reconnecting")
            }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(30))
        }
    }

    private func handle(_ event: ServerSentEvent) {
        guard let kind = device?.kind, let notification = SimulatorNotification(json: event.data, kind: kind) else {
            EventOutput.error("invalidSignal", "a notification could not be parsed")
            return
        }
        EventOutput.emit("signal", notification.fields + [("payload", EventField.object(notification.payload))])
        if let badge = notification.badge { EventOutput.emit("badge", [("badge", .int(badge))]) }
        guard let engine else { return }
        let state = notification.state
        Task { await engine.request(.signal(state: state)) }
    }

    // MARK: - The server's event stream

    private func printEvents(_ live: LiveSync) async {
        for await event in live.events {
            switch event {
            case .connected:
                EventOutput.emit("stream", [("state", .string("connected")), ("source", .string("server"))])
            case .lost(let error, let attempt, let retryIn):
                EventOutput.error(
                    "changeStreamLost", "the server's event stream is down (\(error)); reconnecting",
                    [("attempt", .int(attempt)), ("retryInMs", .int(Int(retryIn.wholeMilliseconds)))])
            case .stopped(.unauthorized):
                await streamUnauthorized(live)
            case .stopped(let error):
                EventOutput.error(
                    "changeStreamStopped", "the server's event stream is refused (\(error)); signals alone drive sync")
            }
        }
    }

    /// The stream was refused with 401: a sync finds out whether the session is gone (its 401 logs in again, which
    /// reopens the stream) or the refusal was stale (the stream is reopened, a few times at most).
    private func streamUnauthorized(_ live: LiveSync) async {
        guard let engine else { return }
        let report = await engine.sync(.manual)
        guard report.outcome != .failed(.unauthorized) else { return }
        guard streamRenewals < 3 else {
            EventOutput.error(
                "changeStreamStopped", "the server's event stream keeps refusing the session; signals alone drive sync")
            return
        }
        streamRenewals += 1
        await live.credentialsRenewed()
    }

    // MARK: - Events

    private var currentTrigger = "launch"
    private var syncsPrinted = 0

    private func printEvents(_ engine: SyncEngine) async {
        for await event in engine.events {
            switch event {
            case .syncStarted(let trigger, let full):
                currentTrigger = trigger.description
                EventOutput.emit("sync-start", [("trigger", .string(trigger.description)), ("full", .bool(full))])
            case .skipped(let trigger):
                EventOutput.emit(
                    "sync-skipped",
                    [
                        ("trigger", .string(trigger.description)),
                        ("state", (await engine.localState).map(EventField.string) ?? .null),
                    ])
            case .retrying(let attempt, let delay, let error):
                EventOutput.error(
                    errorCode(error), error.description,
                    [("attempt", .int(attempt)), ("retryInMs", .int(Int(delay.wholeMilliseconds)))])
            case .syncFinished(let report, let count, let duration):
                EventOutput.emit(
                    "sync-done",
                    [
                        ("state", report.state.map(EventField.string) ?? .null), ("messages", .int(count)),
                        ("created", .int(report.created)), ("updated", .int(report.updated)),
                        ("destroyed", .int(report.destroyed)), ("ms", .int(Int(duration.wholeMilliseconds))),
                        ("trigger", .string(currentTrigger)), ("full", .bool(report.fullResync)),
                        ("pages", .int(report.pages)), ("result", .string(report.fetchResult.rawValue)),
                        ("outcome", .string(Self.outcomeName(report.outcome))),
                    ])
                syncsPrinted += 1
                await afterSync(report, messageCount: count)
            }
        }
    }

    private static func outcomeName(_ outcome: SyncOutcome) -> String {
        switch outcome {
        case .completed: "completed"
        case .skipped: "skipped"
        case .deadlineExceeded: "deadlineExceeded"
        case .failed: "failed"
        }
    }

    private func afterSync(_ report: SyncReport, messageCount: Int) async {
        switch report.outcome {
        case .failed(.unauthorized):
            EventOutput.error("unauthorized", "the server rejected the access token; syncing stopped")
            await relogin()
        case .failed(let error):
            EventOutput.error(errorCode(error), error.description)
        case .deadlineExceeded:
            EventOutput.error("deadlineExceeded", "the sync ran out of time; applied pages stay applied")
        case .completed:
            if let target = options.untilMessages, messageCount == target,
                options.untilState == nil
                    || options.untilState == report.state
            {
                await finish("converged")
            }
            if let target = options.untilState, report.state == target, options.untilMessages == nil {
                await finish("converged")
            }
        case .skipped:
            break
        }
    }

    private func relogin() async {
        guard !reloginAttempted, let engine else {
            EventOutput.emit("exit", [("reason", .string("unauthorized"))])
            exit(1)
        }
        reloginAttempted = true
        do {
            try await transport.login(username: options.username, password: password, deviceName: options.deviceName)
            await engine.credentialsRenewed()
            await live?.credentialsRenewed()
            Task { await engine.sync(.manual) }
        } catch {
            EventOutput.error("unauthorized", "logging in again failed: \(error)")
            EventOutput.emit("exit", [("reason", .string("unauthorized"))])
            exit(1)
        }
    }

    private func startTimeout(_ seconds: Double) {
        let hasCondition = options.untilMessages != nil || options.untilState != nil
        Task {
            try? await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
            if hasCondition {
                EventOutput.error("timeout", "the --until condition was not met within \(seconds) s")
                EventOutput.emit("exit", [("reason", .string("timeout"))])
                exit(3)
            }
            await self.finish("timeout")
        }
    }

    private func finish(_ reason: String) async {
        await shutDown()
        EventOutput.emit("exit", [("reason", .string(reason))])
        exit(0)
    }

    /// Best-effort cleanup: unregisters the device from mailboxd and ends the session.
    func shutDown() async {
        if let engine { await engine.stopFallbackTimer() }
        if let live { await live.stop() }
        if let id = deviceID ?? deviceToken { try? await transport.unregisterDevice(token: id) }
        try? await transport.logout()
    }
}
