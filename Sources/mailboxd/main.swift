import CommandLineSupport
import Foundation
import MailboxService
import MailboxStore
import OpenSSLCrypto

let usage = """
    mailboxd — the SignalFetch mailbox service

    USAGE:
      mailboxd dev-setup --data-dir DIR [--hosts localhost,127.0.0.1,mailboxd,apns-sim,fcm-sim,webpush-sim]
      mailboxd account add USERNAME [--data-dir DIR] [--database URL]   (password on standard input)
      mailboxd account list [--data-dir DIR] [--database URL]
      mailboxd migrate [--data-dir DIR] [--database URL]
                            creates or upgrades the schema and prints the migrations it holds
      mailboxd serve [options]
      mailboxd apns-check --token HEX --environment sandbox|production [--topic BUNDLE_ID] [APNs options]
                            sends one background signal as serve would and prints APNs's answer

    SERVE OPTIONS (each also from MAILBOXD_<OPTION>, e.g. MAILBOXD_DATA_DIR):
      --data-dir DIR            data folder (default ./data)
      --database URL            the store: a file path or sqlite:PATH (default DIR/mailbox.sqlite), or a libpq
                                URI postgresql://USER[:PASSWORD]@HOST:PORT/DB shared by several instances
      --instance-id NAME        this instance's name in outbox leases (default HOSTNAME-PID)
      --listen HOST:PORT        API address (default 127.0.0.1:8443)
      --tls-cert F --tls-key F  TLS files (default DIR/tls/server.pem, DIR/tls/server.key)
      --tls-min-version V       the oldest TLS version accepted: 1.2 (default; AEAD ciphers only) or 1.3
      --plain-http              serve without TLS (development only; prints a warning)
      --delivery-token-file F   token for POST /v1/deliveries (default DIR/delivery-token)
      --apns-url URL            production endpoint for devices registered as "production"
                                (default https://api.push.apple.com; apns-sim: e.g. https://127.0.0.1:2197)
      --apns-sandbox-url URL    sandbox endpoint for devices registered as "sandbox" (development builds)
                                (default https://api.sandbox.push.apple.com; apns-sim: its --sandbox-listen)
      --apns-ca PEM             CA that signs the endpoints' certificates (for apns-sim)
      --apns-key F              APNs signing key, .p8 (default DIR/apns/key.p8)
      --apns-key-id ID          key id (default: contents of DIR/apns/key-id)
      --apns-team-id ID         team id (default: contents of DIR/apns/team-id)
      --apns-topic BUNDLE_ID    the app's bundle id (required unless only --fcm-config is given)
      --signal-kind KIND        badge (badge + content-available, push type alert; default) or background
      --apns-config FILE        several apps and both endpoints in one JSON file (instead of the --apns-* flags,
                                --apns-ca and --signal-kind; see docs/apns.md)
      --fcm-config FILE         Android apps signalled through FCM HTTP v1: endpoint, service accounts,
                                signal kinds (JSON; see docs/fcm.md)
      --webpush-vapid-key PEM   the VAPID key browsers subscribe with and Web Push is signed with (default
                                DIR/webpush/vapid.pem from dev-setup; Web Push is off when there is none)
      --webpush-subject URI     the VAPID contact, mailto:… or https://… (default mailto:postmaster@localhost)
      --webpush-ca PEM          trust this CA instead of the system store for push services (for webpush-sim)
      --webpush-allow-host H[:P]
                                accept endpoints on this host although it is loopback, link-local or private
                                (repeatable; for a local push service; see docs/webpush.md)
      --webpush-signal-kind KIND
                                badge (with the unread count; default) or background
      --signal-burst N          signals a quiet device may get back to back (default 20)
      --signal-refill-per-minute N
                                signals a device gets back each minute once its burst is spent (default 60);
                                changes meanwhile are coalesced and the newest state goes out with the next
      --background-budget N     background signals per device per hour (default 3)
      --max-devices-per-account N
                                devices one account may register (default 100; one more is 409 tooManyDevices)
      --max-connections N       simultaneous API connections, idle and held streams included (default: the
                                open-file limit less 1024, here \(ServiceConfiguration.defaultConnectionLimit()))
      --synchronous MODE        SQLite synchronous: FULL (default) or NORMAL
      --legacy-payload-limit    cap payloads at 2048 bytes instead of 4096
      --access-log              log one line per request to standard error
      --metrics-listen HOST:PORT
                                serve /metrics on a plain-HTTP listener of its own, never the API's (a port alone
                                is on loopback; default: no /metrics)
      --console-token-file F    the console's token (default DIR/console-token from dev-setup; no file: no console)
      --session-idle-timeout D  a session unused this long ends (90s, 15m, 12h, 30d…; default 30d)
      --session-lifetime D      a session ends this long after sign-in whatever its use (default 90d)
      --max-sessions-per-account N
                                sessions one account may hold; one more ends the least recently used (default 20)
      --device-registrations-per-hour N
                                device registrations an account may make per hour (default 60; more is 429)
      --lmtp-listen HOST:PORT   also take mail from an MTA over LMTP (RFC 2033) here (default: off); plain TCP,
                                so bind it to loopback or a private network the MTA shares
      --lmtp-hostname NAME      the name the LMTP listener announces (default mailboxd.HOSTNAME; it must differ
                                from the MTA's own name)
      --max-message-bytes N     the largest LMTP message (default 26214400, 25 MiB)
      --lmtp-max-connections N  simultaneous LMTP sessions (default 64)
      --imap-listen HOST:PORT   also serve IMAP (IMAP4rev2/rev1, IDLE, CONDSTORE/QRESYNC, MOVE; see docs/imap.md)
                                here, implicit TLS with the API's certificate and --tls-min-version (default: off)
      --imap-plain              serve IMAP without TLS and with logins disabled (development only)
      --imap-max-connections N  simultaneous IMAP connections (default 10000)
      --jmap-base-url URL       the prefix of the JMAP Session's URLs behind a proxy (default: the scheme and the
                                request's Host)
      --jmap-push-allow-unencrypted
                                accept JMAP push subscriptions without keys (their pushes are plain JSON, readable
                                by whoever runs the URL's server; see docs/jmap.md)
    """

let environmentPrefix = "MAILBOXD_"

/// The store named by `--database` (or `MAILBOXD_DATABASE`), else the SQLite file in the data folder, which is
/// created when missing.
func storeDatabase(_ args: Arguments, dataDir: String) throws -> StoreDatabase {
    guard let text = args.string("database") else {
        try FileManager.default.createDirectory(atPath: dataDir, withIntermediateDirectories: true)
        return ServiceConfiguration.defaultDatabase(in: dataDir)
    }
    do {
        return try StoreDatabase(parsing: text)
    } catch MailboxStoreError.invalidArgument(let what) {
        throw UsageError("--database: invalid \(what)")
    }
}
// Before anything uses OpenSSL: no exit-time cleanup under threads still using it.
OpenSSLProcess.keepUntilExit()
let arguments = Array(CommandLine.arguments.dropFirst())
// Everything mailboxd creates (the data folder, the database and its -wal and -shm, keys, tokens) is its own from
// the first byte: folders 0700, files 0600.
umask(0o077)

await runCommand(usage: usage) {
    let switches: Set<String> = [
        "help", "plain-http", "legacy-payload-limit", "access-log", "jmap-push-allow-unencrypted", "imap-plain",
    ]
    let args = try Arguments(arguments, switches: switches, environmentPrefix: environmentPrefix)
    if args.positionals.isEmpty || args.wantsHelp {
        print(usage)
        return
    }
    let dataDir = args.string("data-dir", default: "./data")
    switch args.positionals[0] {
    case "dev-setup":
        try args.rejectUnknownFlags(known: ["data-dir", "hosts"])
        let hosts = args.string("hosts").map { $0.split(separator: ",").map(String.init) } ?? DevSetup.defaultHosts
        var created = try DevSetup.run(dataDirectory: dataDir, hosts: hosts)
        created += try DevServiceAccount.write(dataDirectory: dataDir)
        for path in created { print("created \(path)") }
        if created.isEmpty { print("dev-setup: everything already exists in \(dataDir)") }
    case "migrate":
        try args.rejectUnknownFlags(known: ["data-dir", "database"])
        let database = try storeDatabase(args, dataDir: dataDir)
        let store = try MailboxStore(database: database)
        print("migrate: \(database) is at \(try await store.appliedMigrations().joined(separator: ", "))")
    case "account":
        try args.rejectUnknownFlags(known: ["data-dir", "database", "synchronous"])
        guard args.positionals.count >= 2 else { throw UsageError("account needs a subcommand: add or list") }
        let store = try MailboxStore(database: storeDatabase(args, dataDir: dataDir))
        switch args.positionals[1] {
        case "add":
            guard args.positionals.count == 3 else { throw UsageError("usage: mailboxd account add USERNAME") }
            guard let password = readLine(strippingNewline: true), !password.isEmpty else {
                throw UsageError("the password is read from standard input")
            }
            do {
                let account = try await store.createAccount(username: args.positionals[2], password: password)
                print("created account \(account.username) (id \(account.id))")
            } catch MailboxStoreError.usernameTaken {
                throw UsageError("the username \(args.positionals[2]) is taken")
            } catch MailboxStoreError.invalidArgument(let what) {
                throw UsageError("invalid \(what)")
            }
        case "list":
            for account in try await store.accounts() {
                print("\(account.id)\t\(account.username)\tmodseq \(account.modseq)")
            }
        default:
            throw UsageError("unknown account subcommand \(args.positionals[1])")
        }
    case "serve":
        try await Serve.run(args, dataDir: dataDir)
    case "apns-check":
        try await APNsCheck.run(args, dataDir: dataDir)
    default:
        throw UsageError("unknown command \(args.positionals[0])")
    }
}
