import Foundation
import HTTPServer
import IMAP
import JMAP
import MailIngest
import MailboxHTTPAPI
import MailboxStore
import Tracing

/// Everything `mailboxd serve` is configured with.
public struct ServiceConfiguration: Sendable {
    /// The data folder: TLS files, the APNs key, the delivery token, and the SQLite database unless ``database``
    /// names another.
    public var dataDirectory: String
    /// The store's database; `nil` for the embedded default, `DIR/mailbox.sqlite`.
    public var database: StoreDatabase?
    /// The address to listen on.
    public var host = "127.0.0.1"
    /// The port to listen on (0 picks a free one).
    public var port: UInt16 = 8443
    /// TLS certificate and key; `nil` serves plain HTTP.
    public var tlsCertificatePath: String?
    /// The TLS private key.
    public var tlsKeyPath: String?
    /// The oldest TLS version the API accepts (`--tls-min-version`; AEAD ciphers only either way).
    public var tlsMinimumVersion: TLSMinimumVersion = .tls12
    /// The bearer token senders present on `POST /v1/deliveries`.
    public var deliveryToken: String
    /// The most simultaneous API connections (`--max-connections`): room for many idle (or hostile) connections
    /// while legitimate clients are still accepted. By default the process's open-file limit less
    /// `reservedDescriptors`.
    public var connectionLimit = ServiceConfiguration.defaultConnectionLimit()
    /// Descriptors the default connection limit leaves for the store, outbound pushes, LMTP, IMAP and logs.
    public static let reservedDescriptors = 1_024

    /// The open-file limit (the hard one: the server raises its soft limit towards it) less
    /// `reservedDescriptors`, at least 64 and at most 65,536 (a larger limit, as containers often have, is no reason
    /// to let idle connections take every descriptor and their memory; `--max-connections` goes higher).
    public static func defaultConnectionLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 16_000 }
        let files = Int(clamping: limit.rlim_max)  // RLIM_INFINITY clamps to Int.max
        return min(65_536, max(64, files - reservedDescriptors))
    }
    /// The largest accepted request body.
    public var maxBodySize = 1 << 20
    /// The JMAP Session's URL prefix (`--jmap-base-url`); `nil`: the scheme and the request's `Host` header.
    public var jmapBaseURL: String?
    /// Bodies up to this size are included in listings and changes; larger ones are fetched on demand.
    public var inlineBodyLimit = 16_384
    /// Store settings (durability, per-device signal pacing, retention).
    public var store = MailboxStore.Configuration()
    /// How failed sign-ins are counted: refused per username and address and per address, delayed per username.
    public var signIn = SignInLimits()
    /// Device registrations one account may make per hour before 429.
    public var deviceRegistrationsPerHour = 60
    /// The address `/metrics` is served on (plain HTTP, a listener of its own, never the API's); `nil` for none.
    /// Loopback, or a network only the monitoring reaches: the page tells how the service is used.
    public var metricsHost: String?
    /// The metrics listener's port (0 picks a free one).
    public var metricsPort: UInt16 = 9464
    /// The LMTP listener for mail from an MTA; `nil` (the default) for none.
    public var lmtp: LMTPServer.Configuration?
    /// The IMAP listener, when there is one (`--imap-listen`).
    public var imap: IMAPServer.Configuration?
    /// The JMAP WebSocket listener (RFC 8887), when there is one (`--jmap-ws-listen`).
    public var jmapWebSocket: JMAPWebSocketListener?
    /// The VAPID public key the API publishes (`GET /v1/webpush/vapid-public-key`), when Web Push is on.
    public var webPushPublicKey: String?
    /// Whether JMAP push subscriptions without `keys` are accepted (`--jmap-push-allow-unencrypted`): their pushes
    /// are plain JSON, readable by whoever runs the URL's server.
    public var jmapPushAllowsUnencrypted = false
    /// The console token: `/console` is served (to whoever signs in with it) only when there is one.
    public var consoleToken: String?
    /// Where OpenTelemetry traces go (`--otlp-endpoint`); none are made without it.
    public var tracing: SpanExporter.Configuration?
    /// Where to log one line per request; `nil` for none.
    public var accessLog: (@Sendable (String) -> Void)?

    /// A configuration with the given data folder and delivery token.
    public init(dataDirectory: String, deliveryToken: String) {
        self.dataDirectory = dataDirectory
        self.deliveryToken = deliveryToken
    }

    /// The embedded default: the SQLite file `mailbox.sqlite` in the data folder.
    public static func defaultDatabase(in dataDirectory: String) -> StoreDatabase {
        .sqlite(path: dataDirectory + "/mailbox.sqlite")
    }

    /// The store's database: ``database``, else the SQLite file in the data folder.
    public var storeDatabase: StoreDatabase { database ?? Self.defaultDatabase(in: dataDirectory) }
}

/// Where and how JMAP over WebSocket is served: a listener of its own, with the API's certificate.
public struct JMAPWebSocketListener: Sendable {
    /// The address to bind.
    public var host: String
    /// The port (0 picks a free one).
    public var port: UInt16
    /// The certificate chain and key (the API's); `nil`: plain `ws://`, for development.
    public var tls: (certificate: String, privateKey: String)?
    /// The oldest TLS version accepted (`1.2` or `1.3`).
    public var minimumTLSVersion: String
    /// Limits and timers.
    public var limits = JMAPWebSocketServer.Configuration()

    /// A listener on `host:port`.
    public init(
        host: String, port: UInt16, tls: (certificate: String, privateKey: String)?, minimumTLSVersion: String = "1.2"
    ) {
        self.host = host
        self.port = port
        self.tls = tls
        self.minimumTLSVersion = minimumTLSVersion
    }
}
