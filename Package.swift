// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "SignalFetch",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "mailboxd", targets: ["mailboxd"]),
        .executable(name: "apns-sim", targets: ["apns-sim"]),
        .executable(name: "fcm-sim", targets: ["fcm-sim"]),
        .executable(name: "webpush-sim", targets: ["webpush-sim"]),
        .executable(name: "mail-client", targets: ["mail-client"]),
        .library(name: "MailSync", targets: ["MailSync"]),
    ],
    targets: [
        // MARK: C libraries (module maps and C wrappers). Each is imported by the one Swift module over it, except
        // COpenSSL (OpenSSLCrypto; ConnectionLoop, HTTP2Server and HTTP2Client for TLS), CEpoll (ConnectionLoop and the
        // two HTTP/2 loops over its Poller) and CNGHTTP2 (HTTP2Support, HTTP2Server, HTTP2Client); signalfetch-bench
        // also imports CSQLite (its raw-C baseline) and CEpoll.
        .systemLibrary(
            name: "CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(
            name: "COpenSSL", pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CEpoll"),
        .systemLibrary(
            name: "CNGHTTP2", pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(
            name: "CCurlSystem", pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(
            name: "CMicroHTTPDSystem", pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(
            name: "CGMime", pkgConfig: "gmime-3.0",
            providers: [.apt(["libgmime-3.0-dev"])]),
        .systemLibrary(
            name: "CPostgres", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // libwebsockets, with small inline functions in its shim: imported by WebPushSimulator's WebSocket listener only.
        .systemLibrary(
            name: "CWebSockets", pkgConfig: "libwebsockets",
            providers: [.apt(["libwebsockets-dev"])]),
        // wslay: RFC 6455 framing with no I/O of its own, imported by WebSocket only (no pkg-config file in Debian).
        .systemLibrary(name: "CWslay", providers: [.apt(["libwslay-dev"])]),
        // http-parser: the request head of a WebSocket's opening handshake, imported by WebSocket only.
        .systemLibrary(name: "CHTTPParser", providers: [.apt(["libhttp-parser-dev"])]),
        .target(name: "CCurl", dependencies: ["CCurlSystem"]),
        // libmicrohttpd's TLS is GnuTLS: the certificate callback that lets the API's certificate be replaced.
        .target(
            name: "CMicroHTTPD", dependencies: ["CMicroHTTPDSystem"], linkerSettings: [.linkedLibrary("gnutls")]),

        // MARK: Foundations
        // The lock for shared state, on pthread_mutex_t, so the sanitizers see it; threads of their own for blocking
        // work (BlockingExecutor).
        .target(name: "Locking"),
        // `HOST[:PORT]` text read one way for the command line, URL authorities and PostgreSQL host lists.
        .target(name: "NetworkAddress"),
        // Duration in seconds, milliseconds and nanoseconds, for C APIs, metrics and logs; the one wall clock every
        // part reads (`WallClock`: `SystemClock`, tests' `ManualClock`) and the one monotonic reading
        // (`MonotonicTime`).
        .target(name: "Durations", dependencies: ["Locking"]),
        // What the store's SQL is written against, whatever the engine: values, rows, a connection, a dialect.
        .target(name: "SQLSupport"),
        .target(name: "SQLiteKit", dependencies: ["CSQLite", "SQLSupport"]),
        // libpq: the only importer of CPostgres.
        .target(name: "PostgresKit", dependencies: ["CPostgres", "SQLSupport", "Locking", "NetworkAddress"]),
        .target(name: "OpenSSLCrypto", dependencies: ["COpenSSL", "JSONText"]),
        // JSON string literals written by hand (JWTs, FCM messages, capture logs, console events).
        .target(name: "JSONText"),

        // MARK: Transport
        // The vocabulary every HTTP end shares (method, status, version, header fields, the client error), one of each.
        .target(name: "HTTPTypes"),
        .target(name: "HTTPServer", dependencies: ["HTTPTypes", "Durations", "CMicroHTTPD", "JSONText", "Locking"]),
        .target(name: "HTTP2Support", dependencies: ["CNGHTTP2", "ConnectionLoop"]),
        // WebSocket (RFC 6455) without I/O: the opening handshake read (http-parser) and checked, the framing (wslay).
        .target(name: "WebSocket", dependencies: ["CWslay", "CHTTPParser", "HTTPTypes", "JSONText", "OpenSSLCrypto"]),
        .target(
            name: "HTTP2Server",
            dependencies: [
                "CEpoll", "ConnectionLoop", "Durations", "HTTP2Support", "HTTPTypes", "CNGHTTP2", "COpenSSL", "Locking",
            ]),
        .target(
            name: "HTTP2Client",
            dependencies: [
                "CEpoll", "ConnectionLoop", "Durations", "HTTP2Support", "HTTPTypes", "CNGHTTP2", "COpenSSL", "Locking",
                "NetworkAddress",
            ]),
        .target(name: "HTTPClient", dependencies: ["HTTPTypes", "Durations", "CCurl", "Locking", "ServerSentEvents"]),
        // `text/event-stream` (Server-Sent Events) parsing, Foundation only: HTTPClient's streams and MailSync's.
        .target(name: "ServerSentEvents"),

        // MARK: Domain
        // What every push service shares: the content-free signal, state tags, addresses, outcomes, the protocol.
        .target(name: "Push", dependencies: ["OpenSSLCrypto"]),
        .target(
            name: "APNs", dependencies: ["Durations", "Push", "HTTP2Client", "HTTPTypes", "OpenSSLCrypto", "Locking"]),
        // Each push service behind `PushService`: its configuration, its wire form, its answers as outcomes.
        .target(name: "PushAPNs", dependencies: ["Durations", "Push", "APNs", "HTTP2Client", "Locking"]),
        .target(
            name: "PushFCM",
            dependencies: ["Durations", "Push", "HTTP2Client", "OpenSSLCrypto", "Locking", "JSONText"]),
        .target(
            name: "PushWebPush",
            dependencies: ["Durations", "Push", "HTTP2Client", "HTTPClient", "OpenSSLCrypto", "Locking"]),
        // What a message and its mailbox look like on the wire, one of each for the parser, the store, IMAP and the
        // clients.
        .target(name: "MailModel"),
        .target(
            name: "MailboxStore",
            dependencies: [
                "Durations", "MailModel", "Push", "SQLiteKit", "PostgresKit", "OpenSSLCrypto", "Locking", "JSONText",
            ]),
        // mailboxd by job: the counters every part reports to; the dispatcher (outbox worker, backoff, the router to
        // push services); the HTTP API (handlers, auth, throttle); and the service that wires them with LMTP.
        .target(name: "ServiceMetrics", dependencies: ["Locking"]),
        .target(
            name: "SignalDispatch", dependencies: ["Durations", "MailboxStore", "Push", "ServiceMetrics", "Locking"]),
        // JMAP (RFC 8620, RFC 8621) over the store: the Session, method calls, blobs, per-type states.
        .target(
            name: "JMAP",
            dependencies: [
                "ConnectionLoop", "Durations", "MailboxStore", "MailMIME", "JSONText", "Locking", "NetworkAddress",
                "Push", "OpenSSLCrypto", "WebSocket",
            ]),
        .target(
            name: "MailboxHTTPAPI",
            dependencies: [
                "Durations", "JMAP", "Locking",
                "MailboxStore", "Push", "SignalDispatch", "ServiceMetrics", "HTTPServer", "MailMIME", "OpenSSLCrypto",
                "WebClient", "Console", "JSONText", "WebSocket", "LoopEvents",
            ]),
        // The loop's one content-free feed (arrivals, commits, signal outcomes, fetches) and the OpenTelemetry traces
        // made from it.
        .target(name: "LoopEvents", dependencies: ["MailboxStore", "SignalDispatch", "Locking"]),
        .target(
            name: "Tracing",
            dependencies: [
                "LoopEvents", "MailboxStore", "SignalDispatch", "ServiceMetrics", "HTTPClient", "JSONText", "Locking",
                "OpenSSLCrypto",
            ]),
        // The live console's events, snapshot and access (its page is in WebClient).
        .target(
            name: "Console",
            dependencies: [
                "LoopEvents", "Tracing", "MailboxStore", "SignalDispatch", "ServiceMetrics", "HTTPServer", "Locking",
                "OpenSSLCrypto", "JSONText",
            ]),
        .target(
            name: "MailboxService",
            dependencies: [
                "Durations", "MailboxStore", "Push", "SignalDispatch", "MailboxHTTPAPI", "ServiceMetrics", "HTTPServer",
                "MailIngest", "Console", "JMAP", "IMAP", "ConnectionLoop", "LoopEvents", "Tracing",
                "MailMIME", "OpenSSLCrypto", "Locking",
            ]),
        // The client's sync engine, portable (Foundation, the wire model, ServerSentEvents and the Locking primitives
        // only): what an app copies.
        .target(name: "MailSync", dependencies: ["MailModel", "ServerSentEvents", "Locking"]),
        // The web client (plain HTML and JavaScript, no build step), embedded in mailboxd and served at /web/.
        .target(
            name: "WebClient",
            resources: [
                .embedInCode("web/index.html"), .embedInCode("web/app.js"), .embedInCode("web/mail-sync.js"),
                .embedInCode("web/sw.js"), .embedInCode("web/style.css"), .embedInCode("console/console.html"),
                .embedInCode("console/console-signin.html"), .embedInCode("console/console.js"),
                .embedInCode("console/console-signin.js"), .embedInCode("console/console.css"),
            ]),
        // Mail in from an MTA: the LMTP protocol (RFC 2033) as a value-type session.
        .target(name: "MailIngest", dependencies: ["ConnectionLoop", "Durations", "Locking"]),
        // The event loop under line protocols: epoll, TLS over non-blocking sockets, idle timers, a hand-off to the
        // backend and back.
        .target(name: "ConnectionLoop", dependencies: ["CEpoll", "COpenSSL", "Durations", "Locking"]),
        // IMAP4rev2/IMAP4rev1 (RFC 9051, 3501) with IDLE, CONDSTORE/QRESYNC, MOVE, UIDPLUS: a parser and a session
        // state machine on the connection loop.
        .target(name: "IMAP", dependencies: ["ConnectionLoop", "Locking", "MailModel"]),
        // MIME (RFC 5322, 2045–2049, 2047, 2231) with GMime: the only importer of CGMime.
        .target(name: "MailMIME", dependencies: ["CGMime", "MailModel"]),
        .target(name: "MailSyncHTTP", dependencies: ["MailSync", "HTTPClient", "HTTPTypes"]),
        .target(name: "MailSyncSQLite", dependencies: ["MailSync", "SQLiteKit"]),
        // MailSync over URLSession: the exchange an app ships (FoundationNetworking on Linux), MailSync alone beside it.
        .target(name: "MailSyncURLSession", dependencies: ["MailSync", "Locking"]),
        // MailSync over IMAP (QRESYNC): the device that fetches over IMAP after its signal.
        .target(name: "MailSyncIMAP", dependencies: ["MailSync", "IMAP", "ConnectionLoop"]),
        // What the push-service simulators share: millisecond timestamps, a seeded generator, process limits, start-up
        // errors, the fault request's checks, the capture log, the provider request and response either transport
        // hands over, the flags they read alike, and the listeners and control routes (faults, the capture log, health)
        // every simulator runs. Their clock is Durations' `WallClock`.
        .target(
            name: "SimulatorSupport",
            dependencies: ["Durations", "Locking", "HTTPServer", "HTTP2Server", "HTTPTypes", "CommandLineSupport"]),
        .target(
            name: "APNsSimulator",
            dependencies: [
                "Durations", "HTTP2Server", "HTTPServer", "HTTPTypes", "OpenSSLCrypto", "Locking", "SimulatorSupport",
                "JSONText", "ServiceMetrics",
            ]),
        .target(
            name: "FCMSimulator",
            dependencies: [
                "Durations", "HTTP2Server", "HTTPServer", "HTTPTypes", "JSONText", "OpenSSLCrypto", "Locking",
                "SimulatorSupport",
                "ServiceMetrics",
            ]),
        // webpush-sim: push resources (RFC 8030/8291/8292), the simulated browser, Mozilla's WebSocket protocol.
        .target(
            name: "WebPushSimulator",
            dependencies: [
                "Durations", "HTTP2Server", "HTTPServer", "JSONText", "OpenSSLCrypto", "Locking", "SimulatorSupport",
                "CWebSockets",
                "ServiceMetrics",
            ]),

        // MARK: Executables (argument parsing and wiring only)
        .target(name: "CommandLineSupport", dependencies: ["Locking", "NetworkAddress"]),
        .executableTarget(
            name: "mailboxd",
            dependencies: [
                "MailboxService", "SignalDispatch", "Push", "PushAPNs", "PushFCM", "PushWebPush", "MailIngest", "IMAP",
                "CommandLineSupport", "HTTPServer", "HTTP2Client", "Tracing",
                "OpenSSLCrypto",
            ]),
        .executableTarget(
            name: "apns-sim",
            dependencies: ["APNsSimulator", "SimulatorSupport", "CommandLineSupport", "OpenSSLCrypto"]),
        .executableTarget(
            name: "fcm-sim", dependencies: ["FCMSimulator", "SimulatorSupport", "CommandLineSupport", "OpenSSLCrypto"]),
        .executableTarget(
            name: "webpush-sim",
            dependencies: ["WebPushSimulator", "SimulatorSupport", "CommandLineSupport", "OpenSSLCrypto"]),
        .executableTarget(
            name: "mail-client",
            dependencies: [
                "Durations",
                "MailSync", "MailSyncHTTP", "MailSyncIMAP", "MailSyncSQLite", "MailSyncURLSession", "HTTPClient",
                "CommandLineSupport", "OpenSSLCrypto", "JSONText", "ServerSentEvents",
            ]),
        // The reference libcurl client loop (C) that the transport benchmark measures HTTPClient against.
        .executableTarget(name: "curl-multi-load", linkerSettings: [.linkedLibrary("curl")]),
        // The parsers of untrusted input as fuzz targets: `Scripts/fuzz` builds signalfetch-fuzz with libFuzzer;
        // the ordinary build replays the seed corpora and earlier crashes (Tests/Fuzz/) through the same code.
        .target(
            name: "FuzzTargets",
            dependencies: [
                "APNs", "APNsSimulator", "MailboxService", "MailboxHTTPAPI", "SignalDispatch", "ServiceMetrics",
                "MailboxStore", "Push", "PushAPNs", "MailIngest", "MailMIME",
                "HTTPServer", "JMAP", "JSONText", "IMAP", "ConnectionLoop",
                "HTTP2Server", "HTTPClient", "OpenSSLCrypto", "Locking", "ServerSentEvents", "WebSocket",
            ]),
        .executableTarget(name: "signalfetch-fuzz", dependencies: ["FuzzTargets"]),
        .executableTarget(
            name: "signalfetch-bench",
            dependencies: [
                "Durations",
                "SQLiteKit", "CSQLite", "MailboxStore", "Push", "PushFCM", "PushWebPush", "CommandLineSupport", "APNs",
                "HTTPServer", "JMAP", "MailboxHTTPAPI", "SignalDispatch", "ServiceMetrics",
                "HTTP2Server", "HTTPClient", "HTTP2Client", "OpenSSLCrypto", "CEpoll", "Locking", "ConnectionLoop",
                "WebSocket",
            ]),

        // MARK: Tests
        .target(
            name: "TestSupport", dependencies: ["Durations", "Locking", "PostgresKit", "Push"],
            path: "Tests/TestSupport"),
        .testTarget(name: "SQLiteKitTests", dependencies: ["Locking", "SQLiteKit", "TestSupport"]),
        .testTarget(name: "OpenSSLCryptoTests", dependencies: ["OpenSSLCrypto", "TestSupport"]),
        .testTarget(name: "JSONTextTests", dependencies: ["JSONText"]),
        .testTarget(name: "LockingTests", dependencies: ["Locking"]),
        .testTarget(
            name: "HTTPServerTests",
            dependencies: ["Locking", "HTTPServer", "HTTPClient", "OpenSSLCrypto", "TestSupport"]),
        .testTarget(name: "WebSocketTests", dependencies: ["WebSocket"]),
        .testTarget(
            name: "HTTP2ServerTests",
            dependencies: [
                "Locking", "HTTP2Server", "HTTPServer", "HTTPClient", "OpenSSLCrypto", "ConnectionLoop", "COpenSSL",
                "TestSupport",
            ]),
        .testTarget(
            name: "HTTPClientTests",
            dependencies: [
                "HTTPClient", "HTTP2Client", "HTTPServer", "HTTP2Server", "OpenSSLCrypto", "ServerSentEvents",
                "TestSupport",
            ]),
        .testTarget(
            name: "APNsTests",
            dependencies: [
                "Durations", "Locking", "APNs", "Push", "HTTP2Server", "HTTP2Client", "HTTPClient", "OpenSSLCrypto",
                "TestSupport",
            ]),
        .testTarget(
            name: "MailboxStoreTests",
            dependencies: ["Durations", "Locking", "MailboxStore", "SQLiteKit", "PostgresKit", "TestSupport"]),
        .testTarget(
            name: "MailSyncTests",
            dependencies: [
                "Durations", "Locking",
                "MailSync", "MailSyncSQLite", "MailSyncHTTP", "MailSyncURLSession", "HTTPClient", "SQLiteKit",
                "OpenSSLCrypto", "TestSupport",
                "MailboxService", "MailboxStore", "SignalDispatch", "PushAPNs", "APNsSimulator",
            ]),
        .testTarget(
            name: "MailboxServiceTests",
            dependencies: [
                "MailboxService", "MailboxHTTPAPI", "SignalDispatch", "MailboxStore", "APNsSimulator", "HTTPClient",
                "SQLiteKit", "OpenSSLCrypto", "JSONText", "IMAP", "JMAP", "Locking", "TestSupport",
            ]),
        .testTarget(
            name: "TracingTests",
            dependencies: [
                "Tracing", "LoopEvents", "Locking", "MailboxStore", "SignalDispatch", "ServiceMetrics", "Push",
                "HTTPServer", "TestSupport",
            ]),
        .testTarget(
            name: "SignalDispatchTests",
            dependencies: ["Durations", "SignalDispatch", "ServiceMetrics", "MailboxStore", "Push", "TestSupport"]),
        .testTarget(
            name: "PushAPNsTests",
            dependencies: ["PushAPNs", "Push", "APNsSimulator", "MailboxStore", "OpenSSLCrypto", "TestSupport"]),
        .testTarget(
            name: "PushFCMTests", dependencies: ["PushFCM", "Push", "HTTP2Client", "OpenSSLCrypto", "TestSupport"]),
        .testTarget(
            name: "PushWebPushTests",
            dependencies: [
                "Durations", "PushWebPush", "Push", "HTTP2Client", "HTTP2Server", "OpenSSLCrypto", "TestSupport",
                "SimulatorSupport", "WebPushSimulator",
            ]),
        .testTarget(
            name: "APNsSimulatorTests",
            dependencies: ["APNsSimulator", "Durations", "OpenSSLCrypto", "TestSupport"]),
        .testTarget(
            name: "FCMSimulatorTests",
            dependencies: ["Durations", "FCMSimulator", "SimulatorSupport", "OpenSSLCrypto", "Locking", "TestSupport"]),
        .testTarget(
            name: "WebPushSimulatorTests",
            dependencies: [
                "Durations", "WebPushSimulator", "SimulatorSupport", "OpenSSLCrypto", "Locking", "TestSupport",
            ]),
        .testTarget(
            name: "JMAPTests",
            dependencies: [
                "Durations", "JMAP", "JSONText", "Locking", "MailboxStore", "MailboxHTTPAPI", "MailboxService",
                "SignalDispatch",
                "HTTPClient", "TestSupport",
            ]),
        .testTarget(name: "MailIngestTests", dependencies: ["MailIngest", "TestSupport"]),
        .testTarget(name: "IMAPTests", dependencies: ["IMAP", "Locking", "TestSupport"]),
        .testTarget(name: "MailMIMETests", dependencies: ["MailMIME", "TestSupport"], exclude: ["Corpus"]),
        .testTarget(name: "FuzzTargetsTests", dependencies: ["FuzzTargets", "TestSupport"]),
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["Locking", "HTTPClient", "OpenSSLCrypto", "ServerSentEvents", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)

// MARK: - Where each target lives
// The tree reads as the architecture: `Sources/<layer>/<target>`, and each layer's tests in `Tests/<layer>/`. From the
// bottom: C (module maps and C wrappers); Foundation (locks, addresses, durations, SQL, crypto, JSON text, flags);
// Transport (the event loop, HTTP/1.1, HTTP/2, server-sent events); then the domain, Push (signals and the push
// services) and Mail (the store, MIME, LMTP, JMAP, IMAP); Service (mailboxd's parts wired together); Client (MailSync,
// what an app copies); Simulators (the push services' stand-ins); Executables (the five binaries, argument parsing and
// wiring only); Tools (the fuzz and bench harnesses). Tests/IntegrationTests (the binaries together), TestSupport,
// Peers, Fuzz and Sanitizers span the layers and stay at the top of Tests/.
let layers: KeyValuePairs<String, [String]> = [
    "C": [
        "CSQLite", "COpenSSL", "CEpoll", "CNGHTTP2", "CCurlSystem", "CMicroHTTPDSystem", "CGMime", "CPostgres",
        "CWebSockets", "CWslay", "CHTTPParser", "CCurl", "CMicroHTTPD",
    ],
    "Foundation": [
        "Locking", "NetworkAddress", "Durations", "SQLSupport", "SQLiteKit", "PostgresKit", "OpenSSLCrypto", "JSONText",
        "CommandLineSupport", "SQLiteKitTests", "OpenSSLCryptoTests", "JSONTextTests", "LockingTests",
    ],
    "Transport": [
        "ConnectionLoop", "WebSocket", "HTTPTypes", "HTTPServer", "HTTP2Support", "HTTP2Server", "HTTP2Client",
        "HTTPClient", "ServerSentEvents", "HTTPServerTests", "HTTP2ServerTests", "HTTPClientTests", "WebSocketTests",
    ],
    "Push": [
        "Push", "APNs", "PushAPNs", "PushFCM", "PushWebPush", "SignalDispatch", "APNsTests", "PushAPNsTests",
        "PushFCMTests", "PushWebPushTests", "SignalDispatchTests",
    ],
    "Mail": [
        "MailModel", "MailboxStore", "MailMIME", "MailIngest", "JMAP", "IMAP", "MailboxStoreTests", "MailMIMETests",
        "MailIngestTests", "JMAPTests", "IMAPTests",
    ],
    "Service": [
        "ServiceMetrics", "LoopEvents", "Tracing", "TracingTests", "Console", "WebClient", "MailboxHTTPAPI",
        "MailboxService", "MailboxServiceTests",
    ],
    "Client": ["MailSync", "MailSyncHTTP", "MailSyncSQLite", "MailSyncURLSession", "MailSyncIMAP", "MailSyncTests"],
    "Simulators": [
        "SimulatorSupport", "APNsSimulator", "FCMSimulator", "WebPushSimulator", "APNsSimulatorTests",
        "FCMSimulatorTests", "WebPushSimulatorTests",
    ],
    "Executables": ["mailboxd", "apns-sim", "fcm-sim", "webpush-sim", "mail-client"],
    "Tools": ["FuzzTargets", "signalfetch-fuzz", "signalfetch-bench", "curl-multi-load", "FuzzTargetsTests"],
]
for (layer, names) in layers {
    for target in package.targets where names.contains(target.name) {
        precondition(target.path == nil, "\(target.name): its folder is set here, by its layer")
        target.path = (target.type == .test ? "Tests/" : "Sources/") + layer + "/" + target.name
    }
}
