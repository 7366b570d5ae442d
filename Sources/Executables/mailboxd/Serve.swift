import CommandLineSupport
import Foundation
import HTTP2Client
import HTTPServer
import IMAP
import MailIngest
import MailboxService
import MailboxStore
import OpenSSLCrypto
import Push
import PushAPNs
import PushFCM
import PushWebPush
import SQLiteKit
import SignalDispatch
import Tracing

/// `mailboxd serve`: reads the configuration, starts the service, and stops it on SIGTERM or SIGINT.
enum Serve {
    /// `--data-dir`, which every command takes.
    static let dataDirectoryFlag = Flag("data-dir", "DIR", help: "data folder (default ./data)")
    /// `--database`, for every command that opens the store.
    static let databaseFlag = Flag(
        "database", "URL",
        help: "the store: a file path or sqlite:PATH (default DIR/mailbox.sqlite), or a libpq",
        "URI postgresql://USER[:PASSWORD]@HOST:PORT/DB shared by several instances")
    /// `--synchronous`, the SQLite store's durability.
    static let synchronousFlag = Flag("synchronous", "MODE", help: "SQLite synchronous: FULL (default) or NORMAL")
    /// `--apns-config`, every APNs app and endpoint in one file.
    static let apnsConfigFlag = Flag(
        "apns-config", "FILE",
        help: "several apps and both endpoints in one JSON file (instead of the --apns-* flags,",
        "--apns-ca and --signal-kind; see docs/apns.md)")
    /// `--legacy-payload-limit`, the smaller APNs payload.
    static let legacyPayloadLimitFlag = Flag(
        switch: "legacy-payload-limit",
        help: "cap payloads at 2048 bytes instead of 4096")

    /// The flags that describe one app and its endpoints; `--apns-config` replaces them all.
    static let singleAppFlags = FlagTable(
        column: 28,
        [
            Flag(
                "apns-url", "URL",
                help: "production endpoint for devices registered as \"production\"",
                "(default https://api.push.apple.com; apns-sim: e.g. https://127.0.0.1:2197)"),
            Flag(
                "apns-sandbox-url", "URL",
                help: "sandbox endpoint for devices registered as \"sandbox\" (development builds)",
                "(default https://api.sandbox.push.apple.com; apns-sim: its --sandbox-listen)"),
            Flag("apns-ca", "PEM", help: "CA that signs the endpoints' certificates (for apns-sim)"),
            Flag("apns-key", "F", help: "APNs signing key, .p8 (default DIR/apns/key.p8)"),
            Flag("apns-key-id", "ID", help: "key id (default: contents of DIR/apns/key-id)"),
            Flag("apns-team-id", "ID", help: "team id (default: contents of DIR/apns/team-id)"),
            Flag("apns-topic", "BUNDLE_ID", help: "the app's bundle id (required unless only --fcm-config is given)"),
            Flag(
                "signal-kind", "KIND",
                help: "badge (badge + content-available, push type alert; default) or background"),
        ])

    /// Every flag `serve` takes, in the order the help lists them.
    static let flags = FlagTable(
        column: 28,
        [
            dataDirectoryFlag,
            databaseFlag,
            Flag("instance-id", "NAME", help: "this instance's name in outbox leases (default HOSTNAME-PID)"),
            Flag("listen", "HOST:PORT", help: "API address (default 127.0.0.1:8443)"),
            Flag("tls-cert", "F", help: "TLS certificate chain (default DIR/tls/server.pem)"),
            Flag("tls-key", "F", help: "TLS private key (default DIR/tls/server.key)"),
            Flag(
                "tls-min-version", "V",
                help: "the oldest TLS version accepted: 1.2 (default; AEAD ciphers only) or 1.3"),
            Flag(switch: "plain-http", help: "serve without TLS (development only; prints a warning)"),
            Flag("delivery-token-file", "F", help: "token for POST /v1/deliveries (default DIR/delivery-token)"),
            pidFileFlag,
        ] + singleAppFlags.flags + [
            apnsConfigFlag,
            Flag(
                "fcm-config", "FILE",
                help: "Android apps signalled through FCM HTTP v1: endpoint, service accounts,",
                "signal kinds (JSON; see docs/fcm.md)"),
            Flag(
                "webpush-vapid-key", "PEM",
                help: "the VAPID key browsers subscribe with and Web Push is signed with (default",
                "DIR/webpush/vapid.pem from dev-setup; Web Push is off when there is none)"),
            Flag(
                "webpush-vapid-previous-key", "PEM",
                help: "a VAPID key used before --webpush-vapid-key (repeatable): browsers that subscribed",
                "for it are still signed with it until they subscribe again"),
            Flag(
                "webpush-subject", "URI",
                help: "the VAPID contact, mailto:… or https://… (default mailto:postmaster@localhost)"),
            Flag(
                "webpush-ca", "PEM",
                help: "trust this CA instead of the system store for push services (for webpush-sim)"),
            Flag(
                "webpush-allow-host", "H[:P]",
                help: "accept endpoints on this host although it is loopback, link-local or private",
                "(repeatable; for a local push service; see docs/webpush.md)"),
            Flag("webpush-signal-kind", "KIND", help: "badge (with the unread count; default) or background"),
            Flag(
                "push-proxy", "URL",
                help: "reach APNs, FCM (and its token endpoint) and Web Push through this HTTP proxy:",
                "http://[user:password@]host:port, CONNECT tunnels (default: direct)"),
            Flag(
                "push-no-proxy", "HOSTS",
                help: "with --push-proxy: hosts reached directly, the NO_PROXY form (a.com,.b.org,10.0.0.1)"),
            Flag("signal-burst", "N", help: "signals a quiet device may get back to back (default 20)"),
            Flag(
                "signal-refill-per-minute", "N",
                help: "signals a device gets back each minute once its burst is spent (default 60);",
                "changes meanwhile are coalesced and the newest state goes out with the next"),
            Flag("background-budget", "N", help: "background signals per device per hour (default 3)"),
            Flag(
                "max-devices-per-account", "N",
                help: "devices one account may register (default 100; one more is 409 tooManyDevices)"),
            Flag(
                "max-connections", "N",
                help: "simultaneous API connections, idle and held streams included (default: the",
                "open-file limit less 1024, at most 65536; here \(ServiceConfiguration.defaultConnectionLimit()))"),
            synchronousFlag,
            legacyPayloadLimitFlag,
            Flag(switch: "access-log", help: "log one line per request to standard error"),
            Flag(
                "metrics-listen", "HOST:PORT",
                help: "serve /metrics on a plain-HTTP listener of its own, never the API's (a port alone",
                "is on loopback; default: no /metrics)"),
            Flag(
                "console-token-file", "F",
                help: "the console's token (default DIR/console-token from dev-setup; no file: no console)"),
            Flag(
                "otlp-endpoint", "URL",
                help: "export one OpenTelemetry trace per change (arrival, commit, signals, fetches) over",
                "OTLP/HTTP JSON to URL (/v1/traces when it has no path; default: off; docs/operations.md)"),
            Flag("otlp-service-name", "NAME", help: "the traces' service.name (default mailboxd)"),
            Flag("otlp-ca", "PEM", help: "trust this CA instead of the system store for an https:// collector"),
            Flag(
                "session-idle-timeout", "D",
                help: "a session unused this long ends (90s, 15m, 12h, 30d…; default 30d)"),
            Flag(
                "session-lifetime", "D",
                help: "a session ends this long after sign-in whatever its use (default 90d)"),
            Flag(
                "max-sessions-per-account", "N",
                help: "sessions one account may hold; one more ends the least recently used (default 20)"),
            Flag(
                "device-registrations-per-hour", "N",
                help: "device registrations an account may make per hour (default 60; more is 429)"),
            Flag(
                "lmtp-listen", "HOST:PORT",
                help: "also take mail from an MTA over LMTP (RFC 2033) here (default: off); plain TCP,",
                "so bind it to loopback or a private network the MTA shares"),
            Flag(
                "lmtp-hostname", "NAME",
                help: "the name the LMTP listener announces (default mailboxd.HOSTNAME; it must differ",
                "from the MTA's own name)"),
            Flag("max-message-bytes", "N", help: "the largest LMTP message (default 26214400, 25 MiB)"),
            Flag("lmtp-max-connections", "N", help: "simultaneous LMTP sessions (default 64)"),
            Flag(
                "imap-listen", "HOST:PORT",
                help: "also serve IMAP (IMAP4rev2/rev1, IDLE, CONDSTORE/QRESYNC, MOVE; see docs/imap.md)",
                "here, implicit TLS with the API's certificate and --tls-min-version (default: off)"),
            Flag(switch: "imap-plain", help: "serve IMAP without TLS and with logins disabled (development only)"),
            Flag("imap-max-connections", "N", help: "simultaneous IMAP connections (default 10000)"),
            Flag(
                "jmap-ws-listen", "HOST:PORT",
                help: "also serve JMAP over WebSocket (RFC 8887; the Session names it) here, TLS with the",
                "API's certificate, plain ws:// with --plain-http (default: off)"),
            Flag(
                "jmap-ws-max-sockets-per-account", "N",
                help: "WebSockets one account may hold open (default 16; one more is 429 tooManySockets)"),
            Flag(
                "jmap-base-url", "URL",
                help: "the prefix of the JMAP Session's URLs behind a proxy (default: the scheme and the",
                "request's Host)"),
            Flag(
                switch: "jmap-push-allow-unencrypted",
                help: "accept JMAP push subscriptions without keys (their pushes are plain JSON, readable",
                "by whoever runs the URL's server; see docs/jmap.md)"),
        ])

    /// `--pid-file`: where `serve` writes its process id, for `mailboxd reload`.
    static let pidFileFlag = Flag(
        "pid-file", "F",
        help: "write the process id here (removed at exit); SIGHUP, or `mailboxd reload --pid-file F`,",
        "reloads the TLS files, the delivery token, the push configuration and the VAPID key", "without a restart")

    static func readTrimmed(_ path: String, what: String) throws -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw UsageError("cannot read \(what) from \(path) (run `mailboxd dev-setup` first?)")
        }
        let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !value.isEmpty else { throw UsageError("\(path) is empty") }
        return value
    }

    /// The apps and endpoints: from `--apns-config`, or one app from the single-app flags.
    static func apnsConfiguration(_ args: Arguments, dataDir: String) throws -> APNsConfiguration {
        if let file = args.string("apns-config") {
            if let clash = singleAppFlags.names.sorted().first(where: { args.string($0) != nil }) {
                throw UsageError("--apns-config describes every app and endpoint: leave out --\(clash)")
            }
            do {
                return try APNsConfiguration(file: file)
            } catch {
                throw UsageError("--apns-config \(error.message)")
            }
        }
        guard let kind = PushSignal.Kind(rawValue: args.string("signal-kind", default: "badge")) else {
            throw UsageError("--signal-kind must be badge or background")
        }
        let app = APNsConfiguration.App(
            topic: try args.required("apns-topic"), keyFile: args.string("apns-key", default: dataDir + "/apns/key.p8"),
            keyID: try args.string("apns-key-id") ?? readTrimmed(dataDir + "/apns/key-id", what: "the APNs key id"),
            teamID: try args.string("apns-team-id") ?? readTrimmed(dataDir + "/apns/team-id", what: "the APNs team id"),
            signalKind: kind)
        if args.string("apns-ca") != nil, args.string("apns-sandbox-url") == nil {
            throw UsageError(
                "--apns-ca trusts a local gateway's CA for both endpoints: give --apns-sandbox-url too (sandbox "
                    + "devices would otherwise go to \(APNsConfiguration.appleSandbox), which that CA does not sign)")
        }
        if let url = args.string("apns-url"), url != APNsConfiguration.appleProduction,
            args.string("apns-sandbox-url") == nil
        {
            printError(
                "WARNING: --apns-url is the production endpoint only: devices registered as sandbox go to "
                    + "\(APNsConfiguration.appleSandbox) (set --apns-sandbox-url for a local gateway)")
        }
        do {
            return try APNsConfiguration(
                production: args.string("apns-url", default: APNsConfiguration.appleProduction),
                sandbox: args.string("apns-sandbox-url", default: APNsConfiguration.appleSandbox),
                caFile: args.string("apns-ca"), apps: [app])
        } catch {
            throw UsageError("--apns-url/--apns-sandbox-url/--apns-topic: \(error.message)")
        }
    }

    /// The Android apps, from `--fcm-config`, when given.
    /// The HTTP proxy every push sender goes through (`--push-proxy`, `--push-no-proxy`); `nil`: direct.
    static func pushProxy(_ args: Arguments) throws -> HTTP2Client.Proxy? {
        guard let url = args.string("push-proxy") else {
            if args.string("push-no-proxy") != nil { throw UsageError("--push-no-proxy goes with --push-proxy") }
            return nil
        }
        do {
            return try HTTP2Client.Proxy(url: url, noProxy: args.string("push-no-proxy") ?? "")
        } catch {
            // The reason names the URL's shape, never the URL (it may hold a password).
            guard case .invalidRequest(let reason) = error else { throw UsageError("--push-proxy: \(error)") }
            throw UsageError("--push-proxy: \(reason)")
        }
    }

    static func fcmConfiguration(_ args: Arguments) throws -> FCMConfiguration? {
        guard let file = args.string("fcm-config") else { return nil }
        do {
            return try FCMConfiguration(file: file)
        } catch {
            throw UsageError("--fcm-config \(error.message)")
        }
    }

    /// Web Push, when a VAPID key is there: `--webpush-vapid-key`, or `DIR/webpush/vapid.pem` from dev-setup.
    static func webPushConfiguration(_ args: Arguments, dataDir: String) throws -> WebPushConfiguration? {
        let given = args.string("webpush-vapid-key")
        let path = given ?? dataDir + "/webpush/vapid.pem"
        guard given != nil || FileManager.default.fileExists(atPath: path) else {
            for flag in [
                "webpush-subject", "webpush-ca", "webpush-allow-host", "webpush-signal-kind",
                "webpush-vapid-previous-key",
            ]
            where args.string(flag) != nil {
                throw UsageError("--\(flag) configures Web Push: give --webpush-vapid-key too (or run dev-setup)")
            }
            return nil
        }
        guard let kind = PushSignal.Kind(rawValue: args.string("webpush-signal-kind", default: "badge")) else {
            throw UsageError("--webpush-signal-kind must be badge or background")
        }
        var allowed: [String] = []
        for host in args.all("webpush-allow-host") {
            guard !host.isEmpty, host.utf8.count <= 255, host.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f && $0 != 0x2f })
            else { throw UsageError("--webpush-allow-host takes HOST or HOST:PORT") }
            allowed.append(host)
        }
        var previousKeys: [P256PrivateKey] = []
        for file in args.all("webpush-vapid-previous-key") {
            do {
                previousKeys.append(try WebPushConfiguration.vapidKey(file: file))
            } catch {
                throw UsageError("--webpush-vapid-previous-key \(file): \(error.message)")
            }
        }
        do {
            var configuration = try WebPushConfiguration(
                vapidKey: try WebPushConfiguration.vapidKey(file: path),
                subject: args.string("webpush-subject", default: "mailto:postmaster@localhost"),
                caFile: args.string("webpush-ca"), endpointPolicy: WebPushEndpointPolicy(allowedHosts: allowed),
                signalKind: kind)
            configuration.previousVapidKeys = previousKeys
            return configuration
        } catch {
            throw UsageError("--webpush-vapid-key/--webpush-subject: \(error.message)")
        }
    }

    /// The push services the flags and their files describe: APNs unless only FCM is configured, FCM with
    /// `--fcm-config`, Web Push with a VAPID key. Read at start and again at each reload; `previous`, the Web Push
    /// service being replaced, passes on the VAPID keys it signed with.
    struct PushServices {
        var services: [any PushService] = []
        var apns: APNsPushService?
        var fcm: FCMConfiguration?
        var webPush: WebPushPushService?
    }

    static func pushServices(
        _ args: Arguments, dataDir: String, proxy: HTTP2Client.Proxy?, previous: WebPushPushService? = nil
    ) throws -> PushServices {
        var push = PushServices()
        if args.string("fcm-config") == nil || args.string("apns-config") != nil || args.string("apns-topic") != nil {
            var apnsConfiguration = try apnsConfiguration(args, dataDir: dataDir)
            apnsConfiguration.proxy = proxy
            let service = try APNsPushService(
                configuration: apnsConfiguration,
                legacyPayloadLimit: args.flag("legacy-payload-limit"), tokenCacheDirectory: dataDir + "/apns")
            push.services.append(service)
            push.apns = service
        }
        push.fcm = try fcmConfiguration(args)
        push.fcm?.proxy = proxy
        if let fcm = push.fcm { push.services.append(FCMPushService(configuration: fcm)) }
        var webPush = try webPushConfiguration(args, dataDir: dataDir)
        webPush?.proxy = proxy
        if let webPush {
            let service = try WebPushPushService(configuration: webPush, log: { printError($0) }, previous: previous)
            push.services.append(service)
            push.webPush = service
        }
        return push
    }

    /// Warns when the data folder (mail, password and token hashes, keys) or a file in it can be read or written
    /// by anyone but its owner: folders made by an older mailboxd, or by hand.
    static func warnIfReadableByOthers(_ dataDir: String) {
        let fm = FileManager.default
        var loose: [String] = []
        func check(_ path: String) {
            guard let mode = (try? fm.attributesOfItem(atPath: path))?[.posixPermissions] as? Int else { return }
            if mode & 0o077 != 0 { loose.append(path) }
        }
        check(dataDir)
        for name in (fm.enumerator(atPath: dataDir)?.allObjects as? [String] ?? []).sorted() {
            check(dataDir + "/" + name)
        }
        guard !loose.isEmpty else { return }
        printError(
            "WARNING: \(loose.count) path(s) in the data folder are open to other users (e.g. \(loose[0])); "
                + "run `chmod -R go= \(dataDir)` (mailboxd makes folders 0700 and files 0600)")
    }

    /// The LMTP listener, when `--lmtp-listen` asks for one.
    static func lmtpConfiguration(_ args: Arguments) throws -> LMTPServer.Configuration? {
        guard let address = args.string("lmtp-listen") else {
            for flag in ["lmtp-hostname", "max-message-bytes", "lmtp-max-connections"] where args.string(flag) != nil {
                throw UsageError("--\(flag) configures the LMTP listener: give --lmtp-listen too")
            }
            return nil
        }
        let listen = try HostPort(parsing: address)
        let hostname = args.string("lmtp-hostname", default: "mailboxd." + ProcessInfo.processInfo.hostName)
        guard !hostname.isEmpty, hostname.utf8.count <= 255,
            hostname.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { throw UsageError("--lmtp-hostname must be a host name (printable ASCII, no spaces)") }
        let maxBytes = try args.int("max-message-bytes", default: 25 << 20)
        guard (1024...(1 << 30)).contains(maxBytes) else {
            throw UsageError("--max-message-bytes must be between 1024 and 1073741824")
        }
        let connections = try args.int("lmtp-max-connections", default: 64)
        guard (1...4096).contains(connections) else { throw UsageError("--lmtp-max-connections must be 1 to 4096") }
        return LMTPServer.Configuration(
            host: listen.host, port: listen.port,
            session: LMTPSession.Configuration(hostname: hostname, maxMessageBytes: maxBytes),
            maxConnections: connections)
    }

    /// The IMAP listener, when `--imap-listen` asks for one: implicit TLS with the API's certificate and minimum
    /// version, or plain text (logins disabled) with `--imap-plain`, for development only.
    static func imapConfiguration(
        _ args: Arguments, _ configuration: ServiceConfiguration
    ) throws -> IMAPServer.Configuration? {
        guard let address = args.string("imap-listen") else {
            for flag in ["imap-plain", "imap-max-connections"] where args.string(flag) != nil || args.flag(flag) {
                throw UsageError("--\(flag) configures the IMAP listener: give --imap-listen too")
            }
            return nil
        }
        let listen = try HostPort(parsing: address)
        var tls: (certificate: String, privateKey: String)?
        if args.flag("imap-plain") {
            printError("WARNING: --imap-plain serves IMAP without TLS; logins are disabled on it (LOGINDISABLED).")
        } else {
            guard let certificate = configuration.tlsCertificatePath, let key = configuration.tlsKeyPath else {
                throw UsageError(
                    "--imap-listen serves TLS with the API's certificate: drop --plain-http or add --imap-plain")
            }
            tls = (certificate, key)
        }
        let connections = try args.int("imap-max-connections", default: 10_000)
        guard (1...1_000_000).contains(connections) else {
            throw UsageError("--imap-max-connections must be 1 to 1000000")
        }
        var session = IMAPSession.Configuration()
        session.maxLiteralBytes = try args.int("max-message-bytes", default: 25 << 20)
        return IMAPServer.Configuration(
            host: listen.host, port: listen.port, tls: tls,
            minimumTLSVersion: configuration.tlsMinimumVersion == .tls13 ? "1.3" : "1.2",
            maxConnections: connections, session: session)
    }

    static func run(_ args: Arguments, dataDir: String) async throws {
        try flags.rejectUnknownFlags(in: args)
        warnIfReadableByOthers(dataDir)
        let listen = try HostPort(parsing: args.string("listen", default: "127.0.0.1:8443"))
        let deliveryToken = try readTrimmed(
            args.string("delivery-token-file", default: dataDir + "/delivery-token"), what: "the delivery token")
        var configuration = ServiceConfiguration(dataDirectory: dataDir, deliveryToken: deliveryToken)
        configuration.database = try storeDatabase(args, dataDir: dataDir)
        if let instance = args.string("instance-id") {
            guard (1...64).contains(instance.utf8.count),
                instance.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f })
            else { throw UsageError("--instance-id must be 1 to 64 printable characters without spaces") }
            configuration.store.instanceID = instance
        }
        configuration.host = listen.host
        configuration.port = listen.port
        if args.flag("plain-http") {
            printError("WARNING: --plain-http serves the API without TLS; bearer tokens and mail travel in clear text.")
        } else {
            configuration.tlsCertificatePath = args.string("tls-cert", default: dataDir + "/tls/server.pem")
            configuration.tlsKeyPath = args.string("tls-key", default: dataDir + "/tls/server.key")
            guard let minimum = TLSMinimumVersion(rawValue: args.string("tls-min-version", default: "1.2")) else {
                throw UsageError("--tls-min-version must be 1.2 or 1.3")
            }
            configuration.tlsMinimumVersion = minimum
        }
        switch args.string("synchronous", default: "FULL").uppercased() {
        case "FULL": configuration.store.synchronous = .full
        case "NORMAL": configuration.store.synchronous = .normal
        default: throw UsageError("--synchronous must be FULL or NORMAL")
        }
        let burst = try args.int("signal-burst", default: 20)
        let refill = try args.int("signal-refill-per-minute", default: 60)
        guard (1...10_000).contains(burst), (1...60_000).contains(refill) else {
            throw UsageError("--signal-burst must be 1 to 10000 and --signal-refill-per-minute 1 to 60000")
        }
        configuration.store.pacing = SignalPacing(burst: Double(burst), refillPerSecond: Double(refill) / 60)
        let devices = try args.int("max-devices-per-account", default: 100)
        guard (1...100_000).contains(devices) else { throw UsageError("--max-devices-per-account must be 1 to 100000") }
        configuration.store.maximumDevicesPerAccount = devices
        configuration.store.sessionIdleTimeout = try args.seconds("session-idle-timeout", default: 30 * 86_400)
        configuration.store.sessionLifetime = try args.seconds("session-lifetime", default: 90 * 86_400)
        guard configuration.store.sessionIdleTimeout <= configuration.store.sessionLifetime else {
            throw UsageError("--session-idle-timeout cannot be longer than --session-lifetime")
        }
        let sessions = try args.int("max-sessions-per-account", default: 20)
        guard (1...10_000).contains(sessions) else { throw UsageError("--max-sessions-per-account must be 1 to 10000") }
        configuration.store.maximumSessionsPerAccount = sessions
        let registrations = try args.int("device-registrations-per-hour", default: 60)
        guard (1...100_000).contains(registrations) else {
            throw UsageError("--device-registrations-per-hour must be 1 to 100000")
        }
        configuration.deviceRegistrationsPerHour = registrations
        let connections = try args.int("max-connections", default: configuration.connectionLimit)
        guard (1...1_000_000).contains(connections) else { throw UsageError("--max-connections must be 1 to 1000000") }
        configuration.connectionLimit = connections
        if let metrics = args.string("metrics-listen") {
            // A port alone is on loopback: the page tells how the service is used, so only the monitoring sees it.
            let listen = try HostPort(parsing: metrics.contains(":") ? metrics : "127.0.0.1:" + metrics)
            configuration.metricsHost = listen.host
            configuration.metricsPort = listen.port
        }
        // The console, when its token is there: `--console-token-file`, or `DIR/console-token` from dev-setup.
        let consoleFile = args.string("console-token-file") ?? dataDir + "/console-token"
        if args.string("console-token-file") != nil || FileManager.default.fileExists(atPath: consoleFile) {
            let token = try readTrimmed(consoleFile, what: "the console token")
            guard token.utf8.count >= 16, token.utf8.count <= 256 else {
                throw UsageError("the console token in \(consoleFile) must be 16 to 256 characters")
            }
            configuration.consoleToken = token
        }
        if let endpoint = args.string("otlp-endpoint") {
            let url: String
            do {
                url = try SpanExporter.endpoint(endpoint)
            } catch {
                throw UsageError(error.description)
            }
            var tracing = SpanExporter.Configuration(endpoint: url)
            let name = args.string("otlp-service-name", default: "mailboxd")
            guard (1...64).contains(name.utf8.count), SpanAttribute.isToken(name) else {
                throw UsageError("--otlp-service-name must be 1 to 64 letters, digits, '.', '_', '-' or ':'")
            }
            tracing.serviceName = name
            if let ca = args.string("otlp-ca") {
                guard FileManager.default.isReadableFile(atPath: ca) else {
                    throw UsageError("--otlp-ca: cannot read \(ca)")
                }
                tracing.caFile = ca
            }
            configuration.tracing = tracing
        } else if args.string("otlp-service-name") != nil || args.string("otlp-ca") != nil {
            throw UsageError("--otlp-service-name and --otlp-ca need --otlp-endpoint")
        }
        if let base = args.string("jmap-base-url") {
            // The prefix clients reach this listener at, behind a proxy: `https://host[:port]`, no path.
            guard let url = URLComponents(string: base), url.scheme == "https" || url.scheme == "http",
                let host = url.host, !host.isEmpty, url.path.isEmpty, url.query == nil, url.fragment == nil,
                url.user == nil
            else { throw UsageError("--jmap-base-url must be http(s)://host[:port] with no path, as clients reach it") }
            configuration.jmapBaseURL = base
        }
        // A JMAP push subscription without keys gets plain JSON: readable by whoever runs the URL's server.
        configuration.jmapPushAllowsUnencrypted = args.flag("jmap-push-allow-unencrypted")
        if args.flag("access-log") {
            configuration.accessLog = { line in printError(line) }
        }

        configuration.lmtp = try lmtpConfiguration(args)
        configuration.imap = try imapConfiguration(args, configuration)
        if let address = args.string("jmap-ws-listen") {
            let listen = try HostPort(parsing: address)
            configuration.jmapWebSocket = JMAPWebSocketListener(
                host: listen.host, port: listen.port,
                tls: configuration.tlsCertificatePath.flatMap { certificate in
                    configuration.tlsKeyPath.map { (certificate, $0) }
                },
                minimumTLSVersion: configuration.tlsMinimumVersion == .tls13 ? "1.3" : "1.2")
            let perAccount = try args.int("jmap-ws-max-sockets-per-account", default: 16)
            guard (1...100_000).contains(perAccount) else {
                throw UsageError("--jmap-ws-max-sockets-per-account must be 1 to 100000")
            }
            configuration.jmapWebSocket?.limits.maxSocketsPerAccount = perAccount
        } else if args.string("jmap-ws-max-sockets-per-account") != nil {
            throw UsageError(
                "--jmap-ws-max-sockets-per-account configures the WebSocket listener: give --jmap-ws-listen too")
        }

        let proxy = try pushProxy(args)
        let push = try pushServices(args, dataDir: dataDir, proxy: proxy)
        configuration.webPushPublicKey = push.webPush?.vapidPublicKey
        let (services, apns, fcm, webPush) = (push.services, push.apns, push.fcm, push.webPush?.configuration)
        let router = PushRouter(services)
        var dispatcher = SignalDispatcher.Configuration()
        dispatcher.backgroundBudget = try args.int("background-budget", default: 3)

        let log: @Sendable (String) -> Void = { message in printError(message) }
        let store = try await MailboxService.openStore(configuration: configuration, log: log)
        let service = try MailboxService(
            configuration: configuration, router: router, dispatcherConfiguration: dispatcher, store: store, log: log)
        let scheme = configuration.tlsCertificatePath == nil ? "http" : "https"
        printError(
            "mailboxd listening on \(scheme)://\(listen.host):\(service.port) (data \(dataDir), store "
                + "\(configuration.storeDatabase), instance \(configuration.store.instanceID))")
        if configuration.consoleToken != nil {
            printError(
                "mailboxd: console on \(scheme)://\(listen.host):\(service.port)/console (token in \(consoleFile))")
        }
        if let host = configuration.metricsHost, let port = service.metricsPort {
            printError("mailboxd: metrics on http://\(HostPort(host: host, port: port))/metrics")
        }
        if let lmtp = configuration.lmtp, let port = service.lmtpPort {
            printError("mailboxd: LMTP on \(lmtp.host):\(port) as \(lmtp.session.hostname)")
        }
        if let imap = configuration.imap, let port = service.imapPort {
            let scheme = imap.tls == nil ? "imap" : "imaps"
            printError("mailboxd: IMAP on \(scheme)://\(HostPort(host: imap.host, port: port))")
        }
        if let webSocket = configuration.jmapWebSocket, let port = service.jmapWebSocketPort {
            let scheme = webSocket.tls == nil ? "ws" : "wss"
            printError("mailboxd: JMAP WebSocket on \(scheme)://\(HostPort(host: webSocket.host, port: port))/jmap/ws")
        }
        if let apns {
            let apps = apns.configuration.apps.map(\.topic).joined(separator: ", ")
            printError(
                "mailboxd: APNs production \(apns.configuration.production), sandbox \(apns.configuration.sandbox); "
                    + "apps \(apps)")
        }
        if let fcm {
            printError(
                "mailboxd: FCM \(fcm.endpoint); apps \(fcm.apps.map(\.app).joined(separator: ", "))")
        }
        if let proxy {
            printError("mailboxd: push services through the proxy \(proxy.host):\(proxy.port)")
        }
        if let webPush {
            let allowed = webPush.endpointPolicy.allowedHosts.sorted().joined(separator: ", ")
            printError(
                "mailboxd: Web Push as \(webPush.subject)" + (allowed.isEmpty ? "" : "; local push services \(allowed)")
            )
        }
        let pidFile = args.string("pid-file")
        if let pidFile {
            do {
                try "\(getpid())\n".write(toFile: pidFile, atomically: true, encoding: .utf8)
            } catch {
                throw UsageError("cannot write the pid file \(pidFile): \((error as NSError).localizedDescription)")
            }
        }
        let tokenFile = args.string("delivery-token-file", default: dataDir + "/delivery-token")
        let reloads = ReloadSignal.install {
            let token: String?
            var unreadable: [String] = []
            do {
                token = try readTrimmed(tokenFile, what: "the delivery token")
            } catch {
                (token, unreadable) = (nil, ["the delivery token: \(error)"])
            }
            var replacement: PushServices?
            do {
                replacement = try pushServices(
                    args, dataDir: dataDir, proxy: proxy,
                    previous: router.service(.webpush) as? WebPushPushService)
            } catch {
                unreadable.append("the push configuration: \(error)")
            }
            let (reloaded, failures) = service.reload(
                deliveryToken: token, push: replacement.map { ($0.services, $0.webPush?.vapidPublicKey) },
                refused: unreadable)
            if !reloaded.isEmpty { printError("mailboxd: reloaded \(reloaded.joined(separator: ", "))") }
            for failure in failures { printError("mailboxd: reload kept what it had for \(failure)") }
        }
        await TerminationSignals.wait()
        reloads.cancel()
        if let pidFile { unlink(pidFile) }
        printError("mailboxd: shutting down")
        await service.shutdown()
        router.shutdown()
    }
}
