import CommandLineSupport
import Foundation
import MailboxService
import MailboxStore
import OpenSSLCrypto

// Before anything uses OpenSSL: no exit-time cleanup under threads still using it.
OpenSSLProcess.keepUntilExit()

let usage = """
    mailboxd — the SignalFetch mailbox service

    USAGE:
      mailboxd dev-setup --data-dir DIR [--hosts localhost,127.0.0.1,mailboxd,apns-sim,fcm-sim,webpush-sim]
      mailboxd account add USERNAME [--data-dir DIR] [--database URL]   (password on standard input)
      mailboxd account list [--data-dir DIR] [--database URL]
      mailboxd migrate [--data-dir DIR] [--database URL]
                            creates or upgrades the schema and prints the migrations it holds
      mailboxd serve [options]
      mailboxd reload --pid-file F
                            asks the serve whose pid F holds to reload its certificates and delivery token (SIGHUP)
      mailboxd apns-check --token HEX --environment sandbox|production [--topic BUNDLE_ID] [APNs options]
                            sends one background signal as serve would and prints APNs's answer

    SERVE OPTIONS (each also from MAILBOXD_<OPTION>, e.g. MAILBOXD_DATA_DIR):
    \(Serve.flags.help)

    DEV-SETUP AND APNS-CHECK OPTIONS (and the serve options their usage lines show):
    \(OtherCommands.ownFlags.help)
    """

let environmentPrefix = "MAILBOXD_"

/// The flags of `dev-setup`, `migrate` and `account`, and those of every command together.
enum OtherCommands {
    /// `--hosts`, the names in the server certificate dev-setup makes.
    static let hostsFlag = Flag(
        "hosts", "NAMES",
        help: "the host names of dev-setup's server certificate, comma-separated (default",
        DevSetup.defaultHosts.joined(separator: ",") + ")")
    /// `dev-setup`'s flags.
    static let devSetup = FlagTable(column: 28, [Serve.dataDirectoryFlag, hostsFlag])
    /// `migrate`'s flags.
    static let migrate = FlagTable(column: 28, [Serve.dataDirectoryFlag, Serve.databaseFlag])
    /// `account`'s flags.
    static let account = FlagTable(column: 28, [Serve.dataDirectoryFlag, Serve.databaseFlag, Serve.synchronousFlag])
    /// `reload`'s flags.
    static let reload = FlagTable(column: 28, [Serve.pidFileFlag])
    /// The flags no `serve` option line lists, for the help.
    static let ownFlags = FlagTable(column: 28, [hostsFlag]) + APNsCheck.ownFlags
    /// Every command's flags: the command line is parsed with them before the command is known.
    static let every = devSetup + migrate + account + reload + Serve.flags + APNsCheck.flags
}

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
let arguments = Array(CommandLine.arguments.dropFirst())
// Everything mailboxd creates (the data folder, the database and its -wal and -shm, keys, tokens) is its own from
// the first byte: folders 0700, files 0600.
umask(0o077)

await runCommand(usage: usage) {
    let args = try Arguments(
        arguments, switches: OtherCommands.every.switches.union(["help"]), environmentPrefix: environmentPrefix)
    if args.positionals.isEmpty || args.wantsHelp {
        print(usage)
        return
    }
    let dataDir = args.string("data-dir", default: "./data")
    switch args.positionals[0] {
    case "dev-setup":
        try OtherCommands.devSetup.rejectUnknownFlags(in: args)
        let hosts = args.string("hosts").map { $0.split(separator: ",").map(String.init) } ?? DevSetup.defaultHosts
        var created = try DevSetup.run(dataDirectory: dataDir, hosts: hosts)
        created += try DevServiceAccount.write(dataDirectory: dataDir)
        for path in created { print("created \(path)") }
        if created.isEmpty { print("dev-setup: everything already exists in \(dataDir)") }
    case "migrate":
        try OtherCommands.migrate.rejectUnknownFlags(in: args)
        let database = try storeDatabase(args, dataDir: dataDir)
        let store = try MailboxStore(database: database)
        print("migrate: \(database) is at \(try await store.appliedMigrations().joined(separator: ", "))")
    case "account":
        try OtherCommands.account.rejectUnknownFlags(in: args)
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
    case "reload":
        try OtherCommands.reload.rejectUnknownFlags(in: args)
        guard let pidFile = args.string("pid-file") else { throw UsageError("reload needs --pid-file F") }
        print("reload: asked process \(try ReloadSignal.send(pidFile: pidFile)) to reload")
    default:
        throw UsageError("unknown command \(args.positionals[0])")
    }
}
