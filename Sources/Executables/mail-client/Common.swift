import CommandLineSupport
import Durations
import Foundation
import HTTPClient
import MailSync
import MailSyncHTTP
import MailSyncURLSession

/// The flags `run` and `fleet` share for the devices they simulate.
enum DeviceOptions {
    /// Where the devices' pushes are addressed: `--topic`, `--environment`.
    static let pushTarget = FlagTable(
        column: 26,
        [
            Flag("topic", "BUNDLE_ID", help: "push topic (default: com.example.signalfetch)"),
            Flag("environment", "ENV", help: "sandbox or production (default: sandbox)"),
        ])

    /// When and how much the devices sync: `--fallback-interval`, `--signal-deadline`, `--page-size`.
    static let syncSchedule = FlagTable(
        column: 26,
        [
            Flag("fallback-interval", "S", help: "seconds between timer syncs (default: 300; 0 disables)"),
            Flag("signal-deadline", "S", help: "seconds a signal-started sync may take (default: 25)"),
            Flag("page-size", "N", help: "max changes per page (default: 100)"),
        ])
}

/// Options shared by the commands that talk to mailboxd.
struct ServerOptions {
    /// `--server`, `--ca` and `--pin`, which every command that talks to mailboxd takes.
    static let flags = FlagTable(
        column: 26,
        [
            Flag("server", "URL", help: "mailboxd base URL, e.g. https://127.0.0.1:8443"),
            Flag("ca", "PEM", help: "CA certificate file to trust for the server (default: system store)"),
            Flag("pin", "SPKI", help: "base64 SHA-256 of the server's SubjectPublicKeyInfo (repeatable)"),
            Flag(
                "transport", "T",
                help: "the HTTP stack: curl (libcurl, default) or urlsession (Foundation's URLSession, as an app"
                    + " ships; it trusts the system store only: no --ca or --pin)"),
        ])

    /// The HTTP stacks a device can talk to mailboxd through.
    enum Transport: String {
        case curl, urlsession
    }

    var server: String
    var ca: String?
    var pins: [String]
    var transport: Transport

    init(_ arguments: Arguments) throws {
        server = try arguments.required("server")
        ca = arguments.string("ca")
        pins = arguments.all("pin")
        let transportName = arguments.string("transport") ?? "curl"
        guard let transport = Transport(rawValue: transportName) else {
            throw UsageError("--transport must be curl or urlsession")
        }
        self.transport = transport
        if let ca, !FileManager.default.fileExists(atPath: ca) { throw UsageError("--ca file not found: \(ca)") }
        if transport == .urlsession, ca != nil || !pins.isEmpty {
            throw UsageError(
                "--transport urlsession trusts the system's CA store only (FoundationNetworking takes no CA or pin"
                    + " from code): drop --ca and --pin, and add the CA to the system store")
        }
    }

    /// The API client over the chosen HTTP stack.
    func makeTransport() throws -> MailAPIClient {
        switch transport {
        case .urlsession:
            return MailAPIClient(exchange: try URLSessionMailExchange(baseURL: server))
        case .curl:
            let client = HTTPClient(
                configuration: .init(
                    httpVersion: .http1, tls: TLSConfiguration(caFile: ca, pinnedPublicKeys: pins),
                    requestTimeout: .seconds(30)))
            return try MailAPIClient(baseURL: server, client: client)
        }
    }
}

/// Reads the password: the first line of standard input.
func readPassword() throws -> String {
    guard let line = readLine(strippingNewline: true), !line.isEmpty else {
        throw UsageError("the password must be given on standard input")
    }
    return line
}

/// Parses the arguments of a subcommand with its flags, printing its help and exiting on `--help`.
func parse(_ arguments: [String], usage: String, flags: FlagTable) throws -> Arguments {
    let parsed = try flags.parse(arguments, environmentPrefix: "MAIL_CLIENT_")
    if parsed.wantsHelp {
        print(usage)
        exit(0)
    }
    return parsed
}

/// An error event for a failure, then exit status 1.
func fail(_ error: any Error, context: String) -> Never {
    if let error = error as? MailSyncError {
        EventOutput.error(errorCode(error), "\(context): \(error)")
    } else if let error = error as? UsageError {
        printError("error: \(error.message)")
        exit(2)
    } else {
        EventOutput.error("failed", "\(context): \(error)")
    }
    exit(1)
}

/// The code printed in error events: the server's machine code when it sent one.
func errorCode(_ error: MailSyncError) -> String {
    if case .server(_, let code?, _) = error { return code }
    return error.code
}

/// Runs `body`, retrying network failures and 429/5xx with backoff for up to `attempts` tries.
func withStartupRetries<T: Sendable>(
    _ what: String, attempts: Int = 8, _ body: @Sendable () async throws -> T
) async throws -> T {
    var delay = Duration.milliseconds(250)
    for attempt in 1... {
        do {
            return try await body()
        } catch let error as MailSyncError where error.isRetryable && attempt < attempts {
            var wait = delay
            if case .server(_, _, let retryAfter?) = error { wait = max(wait, retryAfter) }
            EventOutput.error(errorCode(error), "\(what): \(error)", [("retryInMs", .int(Int(wait.wholeMilliseconds)))])
            try await Task.sleep(for: wait)
        } catch let error as SimulatorDevice.Failure where error.status == nil && attempt < attempts {
            EventOutput.error("simulator", "\(what): \(error)", [("retryInMs", .int(Int(delay.wholeMilliseconds)))])
            try await Task.sleep(for: delay)
        }
        delay = min(delay * 2, .seconds(5))
    }
    fatalError("unreachable")
}
