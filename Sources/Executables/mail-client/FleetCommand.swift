import CommandLineSupport
import Foundation
import HTTPClient
import MailSync
import MailSyncHTTP
import MailSyncSQLite
import MailSyncURLSession

/// `mail-client fleet`: many simulated devices in one process, each the same `DeviceClient` as `run` with its own
/// sync engine, cache and notification stream; they share one HTTP client for the server and one for apns-sim.
enum FleetCommand {
    static let usage = """
        usage: mail-client fleet --server URL [--ca PEM] --sim URL --state-dir DIR [options] < DEVICES

        Runs one simulated device per line of standard input, "NAME USERNAME PASSWORD [SERVICE [TRANSPORT]]",
        each as `mail-client run` would (cache in DIR/NAME); SERVICE (apns, fcm or webpush, default --service)
        mixes services in one fleet, and TRANSPORT (curl or urlsession, default --transport) HTTP stacks: a
        urlsession device trusts the system store only, while --ca and --pin are for the curl devices. Every event
        line carries the device's NAME as "device". A device that cannot start ends the whole fleet with status 1.

        \(flags.help)
        SIGTERM or SIGINT unregisters every device, logs out and exits 0.
        """

    /// Every flag `fleet` takes, in the order its help lists them.
    static let flags =
        ServerOptions.flags
        + FlagTable(
            column: 26,
            [
                Flag("sim", "URL", help: "apns-sim device-side base URL (for apns devices)"),
                Flag("fcm-sim", "URL", help: "fcm-sim device-side base URL (for fcm devices)"),
                Flag("webpush-sim", "URL", help: "webpush-sim device-side base URL (for webpush devices)"),
                Flag("service", "S", help: "the service of lines that name none: apns (default), fcm or webpush"),
                Flag("app", "PACKAGE", help: "fcm devices' Android package (default: com.example.signalfetch)"),
                Flag("fcm-project", "ID", help: "fcm devices' Firebase project (default: signalfetch-dev)"),
                Flag("sim-ca", "PEM", help: "CA for an https --sim (default: --ca)"),
                Flag("state-dir", "DIR", help: "folder for the devices' caches"),
            ])
        + DeviceOptions.pushTarget
        + DeviceOptions.syncSchedule
        + FlagTable(
            column: 26,
            [
                Flag(
                    switch: "live",
                    help: "every device holds the server's event stream while running and syncs on each",
                    "change at once (pushes still wake it when the stream is down)"),
                Flag("start-concurrency", "N", help: "devices starting at once (default: 16)"),
                Flag(
                    "fetch", "api|imap",
                    help: "what every device's syncs fetch over: /v1 (default) or IMAP with QRESYNC"),
                Flag("imap", "HOST:PORT", help: "with --fetch imap: the server's IMAPS address"),
            ])

    static func main(_ argv: [String]) async throws {
        let arguments = try parse(argv, usage: usage, flags: flags)
        let live = arguments.flag("live")
        let server = try ServerOptions(arguments)
        let stateDirectory = try arguments.required("state-dir")
        let defaultService = arguments.string("service", default: "apns")
        guard ["apns", "fcm", "webpush"].contains(defaultService) else {
            throw UsageError("--service must be apns, fcm or webpush")
        }
        let environment = arguments.string("environment", default: "sandbox")
        guard ["sandbox", "production"].contains(environment) else {
            throw UsageError("--environment must be sandbox or production")
        }
        let startConcurrency = try arguments.int("start-concurrency", default: 16)
        guard startConcurrency > 0 else { throw UsageError("--start-concurrency must be positive") }
        var devices: [FleetDevice] = []
        while let line = readLine(strippingNewline: true) {
            guard let device = try FleetDevice(line: line, service: defaultService, transport: server.transport)
            else { continue }
            devices.append(device)
        }
        let sims = [
            "apns": arguments.string("sim"), "fcm": arguments.string("fcm-sim"),
            "webpush": arguments.string("webpush-sim"),
        ]
        for (service, flag) in [("apns", "sim"), ("fcm", "fcm-sim"), ("webpush", "webpush-sim")]
        where devices.contains(where: { $0.service == service }) && sims[service] ?? nil == nil {
            throw UsageError("--\(flag) is required for \(service) devices")
        }
        guard !devices.isEmpty else { throw UsageError("no devices on standard input") }

        // HTTP/1.1 keeps one request per connection: room for every device's sync at once (and with --live its
        // event stream, held for good), and on the simulator's side for every device's notification stream plus its
        // registrations.
        let api = HTTPClient(
            configuration: .init(
                httpVersion: .http1, tls: TLSConfiguration(caFile: server.ca, pinnedPublicKeys: server.pins),
                requestTimeout: .seconds(30), maximumConnectionsPerHost: devices.count * (live ? 2 : 1) + 8))
        let simulator = HTTPClient(
            configuration: .init(
                httpVersion: .http1, tls: TLSConfiguration(caFile: arguments.string("sim-ca") ?? server.ca),
                requestTimeout: .seconds(30), maximumConnectionsPerHost: devices.count + 16))
        var clients: [(String, DeviceClient)] = []
        for device in devices {
            let sim = (sims[device.service] ?? nil) ?? ""
            let options = RunCommand.Options(
                username: device.username, stateDirectory: stateDirectory + "/" + device.name, sim: sim,
                simCA: nil, topic: arguments.string("topic", default: "com.example.signalfetch"),
                environment: environment, deviceName: device.name,
                fallbackInterval: try arguments.double("fallback-interval", default: 300),
                signalDeadline: try arguments.double("signal-deadline", default: 25),
                pageSize: try arguments.int("page-size", default: 100), once: false, live: live, untilMessages: nil,
                untilState: nil, timeout: nil, service: device.service,
                app: arguments.string("app", default: "com.example.signalfetch"),
                fcmProject: arguments.string("fcm-project", default: "signalfetch-dev"))
            try FileManager.default.createDirectory(atPath: options.stateDirectory, withIntermediateDirectories: true)
            let transport =
                device.transport == .urlsession
                ? MailAPIClient(exchange: try URLSessionMailExchange(baseURL: server.server))
                : try MailAPIClient(baseURL: server.server, client: api)
            let client = DeviceClient(
                options: options, password: device.password,
                cache: try SQLiteMailCache(path: RunCommand.cachePath(options.stateDirectory)),
                transport: transport,
                device: SimulatorDevice(
                    baseURL: sim, client: simulator, kind: try options.simulatorKind(transport: transport)),
                fetchTransport: try RunCommand.fetchTransport(
                    arguments, server: server, username: device.username, password: device.password))
            clients.append((device.name, client))
        }
        let fleet = clients
        ShutdownSignals.shared.onShutdown {
            await withTaskGroup(of: Void.self) { group in
                for (_, client) in fleet { group.addTask { await client.shutDown() } }
            }
        }
        // Each device runs for good (its stream held open); they start a few at a time so logins do not pile up.
        let starting = AsyncGate(permits: startConcurrency)
        await withTaskGroup(of: Void.self) { group in
            for (name, client) in fleet {
                group.addTask {
                    await EventOutput.$device.withValue(name) {
                        await starting.acquire()
                        do {
                            try await client.run { await starting.release() }
                        } catch {
                            fail(error, context: "device \(name)")
                        }
                    }
                }
            }
        }
    }
}

/// One line of `fleet`'s standard input: "NAME USERNAME PASSWORD [SERVICE [TRANSPORT]]".
struct FleetDevice {
    var name: String
    var username: String
    var password: String
    var service: String
    var transport: ServerOptions.Transport

    /// The device a line names, with `service` and `transport` where it names none; `nil` for a blank line.
    init?(line: String, service: String, transport: ServerOptions.Transport) throws {
        let parts = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        guard !parts.isEmpty else { return nil }
        guard (3...5).contains(parts.count), !parts[0].contains("/") else {
            throw UsageError(
                "each line of standard input is NAME USERNAME PASSWORD [SERVICE [TRANSPORT]] (got \(parts.count)"
                    + " fields)")
        }
        (name, username, password) = (parts[0], parts[1], parts[2])
        self.service = parts.count >= 4 ? parts[3] : service
        guard ["apns", "fcm", "webpush"].contains(self.service) else {
            throw UsageError("SERVICE must be apns, fcm or webpush (device \(name))")
        }
        if parts.count == 5 {
            guard let named = ServerOptions.Transport(rawValue: parts[4]) else {
                throw UsageError("TRANSPORT must be curl or urlsession (device \(name))")
            }
            self.transport = named
        } else {
            self.transport = transport
        }
    }
}

/// At most `permits` holders at once; the others wait in order.
actor AsyncGate {
    private var permits: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(permits: Int) { self.permits = permits }

    func acquire() async {
        if permits > 0 {
            permits -= 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    func release() {
        if waiting.isEmpty {
            permits += 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}
