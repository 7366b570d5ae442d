import Foundation
import TestSupport
import Testing

/// The flags this mailbox's newer features read: each mistake is a start-up error naming the flag (exit 2),
/// never a server that starts half configured.
@Suite("Start-up errors: LMTP, pacing, fleet")
struct StartupErrorTests {
    /// A data folder made by `mailboxd dev-setup`, and the `serve` arguments that use it.
    struct Setup {
        let directory: TemporaryDirectory
        let data: String
        let serve: [String]

        init(prefix: String) throws {
            directory = try TemporaryDirectory(prefix: prefix)
            data = directory.path("data")
            _ = try Subprocess.run(mailboxd, ["dev-setup", "--data-dir", data])
            serve = ["serve", "--data-dir", data, "--listen", "127.0.0.1:0", "--apns-topic", "com.example.a"]
        }
    }

    static let mailboxd = TestEnvironment.executable("mailboxd").path

    /// Runs mailboxd with each case's arguments: each must exit 2 with the case's message on standard error.
    func expectUsageErrors(_ cases: [([String], String)]) throws {
        for (arguments, message) in cases {
            let result = try Subprocess.run(Self.mailboxd, arguments)
            #expect(result.status == 2, "\(arguments): exit \(result.status): \(result.stderr)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
    }

    @Test func badLMTPAndPacingFlagsAreClearErrors() throws {
        let setup = try Setup(prefix: "startup-errors")
        let serve = setup.serve
        try expectUsageErrors(
            [
                (["--lmtp-hostname", "mbox.example"], "give --lmtp-listen too"),
                (["--lmtp-listen", "127.0.0.1:0", "--max-message-bytes", "10"], "--max-message-bytes must be between"),
                (["--lmtp-listen", "127.0.0.1:0", "--lmtp-max-connections", "0"], "--lmtp-max-connections must be"),
                (
                    ["--lmtp-listen", "127.0.0.1:0", "--lmtp-hostname", "two words"],
                    "--lmtp-hostname must be a host name"
                ),
                (["--signal-burst", "0"], "--signal-burst must be 1 to 10000"),
                (["--signal-refill-per-minute", "0"], "--signal-refill-per-minute 1 to 60000"),
            ].map { (serve + $0.0, $0.1) })
    }

    @Test func badSessionLimitMetricsAndConsoleFlagsAreClearErrors() throws {
        let setup = try Setup(prefix: "security-flag-errors")
        let short = setup.directory.path("short-token")
        try "too-short\n".write(toFile: short, atomically: true, encoding: .utf8)
        try expectUsageErrors(
            [
                (["--session-idle-timeout", "0"], "--session-idle-timeout must be a duration"),
                (["--session-lifetime", "5x"], "--session-lifetime must be a duration"),
                (
                    ["--session-idle-timeout", "2d", "--session-lifetime", "1d"],
                    "--session-idle-timeout cannot be longer than --session-lifetime"
                ),
                (["--max-sessions-per-account", "0"], "--max-sessions-per-account must be 1 to 10000"),
                (["--device-registrations-per-hour", "0"], "--device-registrations-per-hour must be 1 to 100000"),
                (["--metrics-listen", "notaport"], "invalid port"),
                (["--console-token-file", short], "must be 16 to 256 characters"),
                (["--console-token-file", setup.directory.path("missing")], "cannot read the console token"),
            ].map { (setup.serve + $0.0, $0.1) })
    }

    @Test func badTracingAndVAPIDFlagsAreClearErrors() throws {
        let setup = try Setup(prefix: "tracing-flag-errors")
        try expectUsageErrors(
            [
                (["--otlp-endpoint", "collector:4318"], "--otlp-endpoint must be an http:// or https:// URL"),
                (["--otlp-endpoint", "http://user:secret@collector:4318"], "no credentials"),
                (["--otlp-endpoint", "ftp://collector"], "--otlp-endpoint must be"),
                (
                    ["--otlp-endpoint", "http://c:4318", "--otlp-service-name", "my service"],
                    "--otlp-service-name must"
                ),
                (["--otlp-service-name", "mailboxd"], "need --otlp-endpoint"),
                (["--otlp-endpoint", "http://c:4318", "--otlp-ca", setup.directory.path("missing.pem")], "--otlp-ca"),
                (
                    ["--webpush-vapid-previous-key", setup.directory.path("missing.pem")],
                    "--webpush-vapid-previous-key"
                ),
            ].map { (setup.serve + $0.0, $0.1) })
        // The URL given, credentials included, is never echoed.
        let result = try Subprocess.run(Self.mailboxd, setup.serve + ["--otlp-endpoint", "http://user:secret@c:1"])
        #expect(!result.stderr.contains("secret"))
    }

    @Test func aBadFCMConfigurationIsAClearErrorNamingTheField() throws {
        let setup = try Setup(prefix: "fcm-errors")
        let account = setup.data + "/fcm/service-account.json"
        func config(_ name: String, _ text: String) throws -> String {
            let path = setup.directory.path(name)
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        // A service-account file that is not one: a client secret (OAuth client), and one without its key.
        let clientSecret = try config("client-secret.json", #"{"installed":{"client_id":"x","client_secret":"y"}}"#)
        var object = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: account))) as? [String: Any])
        object.removeValue(forKey: "private_key")
        let keyless = setup.directory.path("keyless.json")
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: keyless))
        func app(_ file: String) -> String {
            #"{"apps":[{"app":"com.example.a","serviceAccountFile":"\#(file)"}]}"#
        }
        try expectUsageErrors(
            [
                (["--fcm-config", try config("a.json", app(clientSecret))], "\"type\" is missing or not a string"),
                (["--fcm-config", try config("b.json", app(keyless))], "\"private_key\" is missing or not a string"),
                (["--fcm-config", try config("c.json", #"{"apps":[],"endpoint":"x"}"#)], "--fcm-config"),
                (
                    ["--fcm-config", try config("d.json", #"{"apps":[{"app":"mail","serviceAccountFile":"x"}]}"#)],
                    "must be an Android package name"
                ),
                (
                    ["--fcm-config", try config("e.json", app(account) + " trailing")],
                    "cannot be read as a JSON object"
                ),
            ].map { (setup.serve + $0.0, $0.1) })
        // Nothing of the key reaches the error.
        let result = try Subprocess.run(
            Self.mailboxd, setup.serve + ["--fcm-config", try config("f.json", app(keyless))])
        #expect(!result.stderr.contains("PRIVATE KEY"))
    }

    @Test func aBadDatabaseIsAClearErrorAndMigrateNamesWhatItHolds() throws {
        let setup = try Setup(prefix: "database-errors")
        let mailboxd = Self.mailboxd
        let serve = setup.serve
        try expectUsageErrors([
            (serve + ["--database", "mysql://root@localhost/mail"], "--database: invalid database URL (scheme mysql"),
            (serve + ["--database", "postgresql://"], "--database: invalid database URL"),
            (
                serve + ["--database", "postgresql://mail:s3cret@db1:5432,,db2:5432/mail"],
                "--database: invalid database URL (an empty host in the host list)"
            ),
            (
                serve + ["--database", "postgresql://mail@db1:5432,db2:99999/mail"],
                "--database: invalid database URL (a port that is not a number from 1 to 65535)"
            ),
            (
                serve + ["--database", "postgresql://mail@db1:5432,db 2/mail"],
                "--database: invalid database URL (whitespace in the URL)"
            ),
            (serve + ["--database", "postgresql://mail@db1,[::1/mail"], "an unclosed [IPv6 address]"),
            (["migrate", "--database", "sqlite:"], "--database: invalid database URL (sqlite: needs a path)"),
            (["account", "list", "--database", "postgres://"], "--database: invalid database URL"),
            (serve + ["--instance-id", "two words"], "--instance-id must be 1 to 64 printable characters"),
            (serve + ["--instance-id", String(repeating: "m", count: 65)], "--instance-id must be 1 to 64"),
        ])
        // Nothing listens on the port: a start-up error naming the failure, without the password.
        let port = freeLocalPort()
        let unreachable = try Subprocess.run(
            mailboxd, ["migrate", "--database", "postgresql://mail:s3cret@127.0.0.1:\(port)/mail"])
        #expect(unreachable.status != 0)
        #expect(unreachable.stderr.contains("Connection refused"), "\(unreachable.stderr)")
        #expect(!unreachable.stderr.contains("s3cret"), "\(unreachable.stderr)")

        let url = try PostgresServer.shared().makeDatabase()
        let migrated = try Subprocess.run(mailboxd, ["migrate", "--database", url])
        #expect(migrated.status == 0, "\(migrated.stderr)")
        #expect(migrated.stdout.contains("001-initial, 002-outbox-leases"), "\(migrated.stdout)")
        let added = try Subprocess.run(
            mailboxd, ["account", "add", "alice", "--database", url], input: "password-alice\n")
        #expect(added.status == 0, "\(added.stderr)")
        let listed = try Subprocess.run(mailboxd, ["account", "list", "--database", url])
        #expect(listed.stdout.contains("alice"), "\(listed.stdout)")

        // A database a newer build migrated is refused at start-up.
        let future = try Subprocess.run(
            "/usr/bin/psql", [url, "-c", "INSERT INTO schema_migrations (name, applied_at) VALUES ('999-next', 0)"])
        #expect(future.status == 0, "\(future.stderr)")
        let refused = try Subprocess.run(mailboxd, serve + ["--database", url])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("newer than this build (it has migration 999-next)"), "\(refused.stderr)")
    }

    @Test func badPushProxyFlagsAreClearErrorsThatNeverEchoTheURL() throws {
        let setup = try Setup(prefix: "startup-errors-proxy")
        let serve = setup.serve
        try expectUsageErrors(
            [
                (serve + ["--push-proxy", "https://u:s3cret@127.0.0.1:3128"], "--push-proxy: the proxy URL must be"),
                (serve + ["--push-proxy", "http://u:s3cret@127.0.0.1"], "--push-proxy: the proxy URL needs a port"),
                (serve + ["--push-proxy", "http://127.0.0.1:3128/x"], "without a path"),
                (serve + ["--push-no-proxy", "example.com"], "--push-no-proxy goes with --push-proxy"),
            ])
        let result = try Subprocess.run(
            TestEnvironment.executable("mailboxd").path, serve + ["--push-proxy", "https://u:s3cret@127.0.0.1:3128"])
        #expect(!result.stderr.contains("s3cret"))
    }

    @Test func badIMAPFlagsAreClearErrors() throws {
        let setup = try Setup(prefix: "startup-errors-imap")
        let serve = setup.serve
        try expectUsageErrors(
            [
                (serve + ["--imap-plain"], "--imap-plain configures the IMAP listener: give --imap-listen too"),
                (
                    serve + ["--imap-listen", "127.0.0.1:0", "--imap-max-connections", "0"],
                    "--imap-max-connections must be 1 to 1000000"
                ),
                (serve + ["--imap-listen", "127.0.0.1:0", "--plain-http"], "--imap-listen serves TLS"),
                (serve + ["--imap-listen", "nowhere"], "expected HOST:PORT"),
            ])
        // A device's --fetch and --imap.
        let client = TestEnvironment.executable("mail-client").path
        let base = [
            "run", "--once", "--server", "https://127.0.0.1:9", "--ca", setup.data + "/tls/ca.pem", "--username",
            "alice", "--state-dir", setup.directory.path("device"),
        ]
        for (extra, message) in [
            (["--fetch", "pop3"], "--fetch must be api or imap"),
            (["--imap", "localhost:993"], "--imap goes with --fetch imap"),
            (["--fetch", "imap"], "missing --imap"),
            (["--fetch", "imap", "--imap", "nowhere"], "expected HOST:PORT"),
        ] {
            let result = try Subprocess.run(client, base + extra, input: "password-alice\n")
            #expect(result.status == 2, "\(extra): exit \(result.status): \(result.stderr)")
            #expect(result.stderr.contains(message), "\(extra): \(result.stderr)")
        }
    }

    @Test func aFleetLineThatIsNotNameUserPasswordIsAClearError() throws {
        let directory = try TemporaryDirectory(prefix: "fleet-errors")
        let client = TestEnvironment.executable("mail-client").path
        let arguments = [
            "fleet", "--server", "https://127.0.0.1:9", "--sim", "http://127.0.0.1:9", "--state-dir",
            directory.path("fleet"),
        ]
        let fields = try Subprocess.run(client, arguments, input: "phone alice\n")
        #expect(fields.status == 2, "exit \(fields.status): \(fields.stderr)")
        #expect(fields.stderr.contains("NAME USERNAME PASSWORD"), "\(fields.stderr)")
        for (line, message) in [
            ("phone alice pw apns curl extra\n", "NAME USERNAME PASSWORD [SERVICE [TRANSPORT]]"),
            ("phone alice pw carrier-pigeon\n", "SERVICE must be apns, fcm or webpush (device phone)"),
            ("phone alice pw apns okhttp\n", "TRANSPORT must be curl or urlsession (device phone)"),
        ] {
            let result = try Subprocess.run(client, arguments, input: line)
            #expect(result.status == 2, "\(line): exit \(result.status): \(result.stderr)")
            #expect(result.stderr.contains(message), "\(line): \(result.stderr)")
        }
        let empty = try Subprocess.run(client, arguments, input: "\n")
        #expect(empty.status == 2, "exit \(empty.status): \(empty.stderr)")
        #expect(empty.stderr.contains("no devices on standard input"), "\(empty.stderr)")
    }
}

/// Every binary's help and its code agree on its flags: each flag the code reads has an option line in the help,
/// each option line names a flag the code reads, and the real binary accepts every flag its help lists (it never
/// answers "unknown option" for one).
@Suite struct HelpListsEveryFlagTests {
    /// A command of a binary: the arguments that print its help, and those that try one of its flags, failing fast
    /// on another argument (or a missing one) so that nothing starts.
    struct Command: Sendable {
        let help: [String]
        let probe: @Sendable (String) -> [String]
    }

    /// A binary, its commands, and the targets whose code reads its flags.
    struct Binary: Sendable {
        let name: String
        let commands: [Command]
        let sources: [String]
    }

    /// Folders that do not exist, so that no probe finds or makes a data folder.
    static let nowhere = "/dev/null/signalfetch-help-test"

    static let binaries: [Binary] = {
        let simulator = [Command(help: ["--help"]) { ["--\($0)=1", "--listen=nowhere"] }]
        return [
            Binary(
                name: "mailboxd",
                // One help for every command; a flag is accepted when one of these commands takes it.
                commands: [
                    Command(help: ["--help"]) { ["serve", "--\($0)=1", "--listen=nowhere", "--data-dir=" + nowhere] },
                    Command(help: ["--help"]) { ["apns-check", "--\($0)=1", "--data-dir=" + nowhere] },
                    Command(help: ["--help"]) { ["migrate", "--\($0)=1", "--data-dir=" + nowhere] },
                    Command(help: ["--help"]) { ["account", "--\($0)=1", "--data-dir=" + nowhere] },
                    Command(help: ["--help"]) { ["dev-setup", "--\($0)=1", "--data-dir=" + nowhere] },
                ],
                sources: ["mailboxd"]),
            Binary(
                name: "apns-sim", commands: simulator,
                sources: ["apns-sim", "SimulatorSupport"]),
            Binary(
                name: "fcm-sim", commands: simulator,
                sources: ["fcm-sim", "SimulatorSupport"]),
            Binary(
                name: "webpush-sim", commands: simulator,
                sources: ["webpush-sim", "SimulatorSupport"]),
            Binary(
                name: "mail-client",
                commands: ["run", "fleet", "send", "mark-read", "update", "delete", "dump"].map { command in
                    Command(help: [command, "--help"]) { [command, "--\($0)=1"] }
                },
                sources: ["mail-client"]),
        ]
    }()

    /// The flags a help lists: those that start an option line (`  --name`).
    static func listedFlags(_ help: String) -> [String] {
        help.split(separator: "\n").compactMap { line in
            guard line.hasPrefix("  --") else { return nil }
            let name = line.dropFirst(4).prefix { $0.isLetter || $0.isNumber || $0 == "-" }
            return name.isEmpty ? nil : String(name)
        }
    }

    /// The flags the Swift code of `targets` reads from an `Arguments` (`args.string("name")`,
    /// `arguments.int("name", …)`, a helper given the arguments and a name, or a method of an `Arguments`
    /// extension called with a name).
    static func readFlags(in targets: [String]) throws -> Set<String> {
        let reading = ["string", "int", "double", "seconds", "flag", "all", "required"]
        let name = #""([a-z0-9][a-z0-9-]*)""#
        var flags: Set<String> = []
        var files = 0
        for target in targets {
            let root = try TestEnvironment.sourceFolder(of: target)
            for file in try FileManager.default.contentsOfDirectory(atPath: root.path) where file.hasSuffix(".swift") {
                let source = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
                files += 1
                var patterns = [
                    #"\b(?:args|arguments)\s*\.\s*(?:"# + reading.joined(separator: "|") + #")\(\s*"# + name,
                    #"\b\w+\(\s*(?:args|arguments)\s*,\s*"# + name,
                ]
                if source.contains("extension Arguments") {
                    // Inside the extension the reading methods, and the extension's own, are called bare.
                    let declared = try NSRegularExpression(pattern: #"func (\w+)\(\s*_ \w+: String"#)
                        .matches(in: source, range: NSRange(source.startIndex..., in: source))
                        .compactMap { Range($0.range(at: 1), in: source).map { String(source[$0]) } }
                    patterns.append(
                        #"(?<![\w.])(?:"# + (reading + declared).joined(separator: "|") + #")\(\s*"# + name)
                }
                for pattern in patterns {
                    let expression = try NSRegularExpression(pattern: pattern)
                    for match in expression.matches(in: source, range: NSRange(source.startIndex..., in: source)) {
                        if let range = Range(match.range(at: 1), in: source) { flags.insert(String(source[range])) }
                    }
                }
            }
        }
        #expect(files > 0, "no Swift sources in \(targets)")
        return flags
    }

    @Test(arguments: HelpListsEveryFlagTests.binaries.map(\.name))
    func helpListsEveryFlagTheCodeReadsAndTheBinaryAcceptsThem(_ name: String) throws {
        let binary = try #require(Self.binaries.first { $0.name == name })
        let executable = TestEnvironment.executable(binary.name).path
        // Each help, and the commands that print it: a flag it lists must be accepted by one of them.
        var helps: [(arguments: [String], commands: [Command])] = []
        for command in binary.commands {
            if let index = helps.firstIndex(where: { $0.arguments == command.help }) {
                helps[index].commands.append(command)
            } else {
                helps.append((command.help, [command]))
            }
        }
        var listed: [(flag: String, commands: [Command])] = []
        for (arguments, commands) in helps {
            let help = try Subprocess.run(executable, arguments, input: "")
            #expect(help.status == 0, "\(name) \(arguments): exit \(help.status): \(help.stderr)")
            let flags = Self.listedFlags(help.stdout)
            #expect(flags.count >= 2, "\(name) \(arguments) lists no flags:\n\(help.stdout)")
            #expect(Set(flags).count == flags.count, "\(name) \(arguments) lists a flag twice: \(flags)")
            listed += flags.map { ($0, commands) }
        }
        let listedNames = Set(listed.map(\.flag))

        let read = try Self.readFlags(in: binary.sources)
        #expect(read.count >= 5, "the flags \(name) reads were not found: \(read.sorted())")
        let unlisted = read.subtracting(listedNames).sorted()
        #expect(unlisted.isEmpty, "\(name) reads flags its help does not list: \(unlisted)")
        let unread = listedNames.subtracting(read).subtracting(["help"]).sorted()
        #expect(unread.isEmpty, "\(name)'s help lists flags its code never reads: \(unread)")

        for (flag, commands) in listed {
            var refusals: [String] = []
            for command in commands {
                let arguments = command.probe(flag)
                let result = try Subprocess.run(executable, arguments, input: "")
                guard result.stderr.contains("unknown option") else {
                    // The probe is built to stop on a bad argument before anything starts.
                    #expect(result.status != 0 || flag == "help", "\(name) \(arguments) succeeded")
                    refusals = []
                    break
                }
                refusals.append("\(arguments): \(result.stderr.prefix { $0 != "\n" })")
            }
            #expect(refusals.isEmpty, "\(name) lists --\(flag) but refuses it: \(refusals)")
        }
    }
}

/// Every binary keeps OpenSSL's global state until the process is gone (``OpenSSLProcess/keepUntilExit()``) before it
/// does anything else: with OpenSSL's default `atexit` cleanup, a thread that used OpenSSL (an HTTP client's I/O
/// thread ending, a TLS connection closing) races `exit` freeing the state under it, and the process aborts on a
/// corrupt heap after its work is done (seen once in `mail-client send`). The choice is made on OpenSSL's first
/// initialisation, so the call must come first in `main.swift`.
@Suite struct OpenSSLExitTests {
    @Test(arguments: HelpListsEveryFlagTests.binaries.map(\.name) + ["signalfetch-bench"])
    func theFirstStatementOfMainKeepsOpenSSLUntilExit(_ name: String) throws {
        let main = try TestEnvironment.sourceFolder(of: name).appendingPathComponent("main.swift")
        let statements = try String(contentsOf: main, encoding: .utf8).split(separator: "\n")
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("//") && !$0.hasPrefix("import ") }
        #expect(
            statements.first == "OpenSSLProcess.keepUntilExit()",
            "\(name): main.swift starts with \(statements.first ?? "nothing")")
    }
}
