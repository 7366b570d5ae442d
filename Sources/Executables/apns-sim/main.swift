import APNsSimulator
import CommandLineSupport
import Foundation
import OpenSSLCrypto
import SimulatorSupport

// Before anything uses OpenSSL: no exit-time cleanup under threads still using it.
OpenSSLProcess.keepUntilExit()

/// Every flag apns-sim takes, in the order its help lists them.
let flags = FlagTable(
    column: 32,
    [
        Flag(
            "listen", "HOST:PORT",
            help: "provider API address, the production environment",
            "(default 127.0.0.1:2197; port 0 picks one)"),
        Flag(
            "sandbox-listen", "HOST:PORT",
            help: "a second provider listener for the sandbox environment; a token is",
            "accepted only on its own environment's listener (BadDeviceToken on the",
            "other). Without it, --listen serves both environments."),
    ]
        + Flag.simulatorTLS(h2c: "serve cleartext HTTP/2 instead of TLS")
        + Flag.simulatorDeviceAPI(default: "127.0.0.1:2198") + [
            Flag("provider-key", "KEY_ID:TEAM_ID:PUBLIC_PEM_PATH", help: "a trusted provider signing key (repeatable)"),
            Flag("topic", "BUNDLE_ID", help: "an allowed topic (repeatable; none given allows every topic)"),
            Flag("background-budget", "N", help: "background pushes per device per window (default 3; 0 = no limit)"),
            Flag("background-window", "SECONDS", help: "the background budget window (default 3600)"),
            Flag("fault-goaway-after", "N", help: "send GOAWAY on a connection after N streams"),
        ]
        + Flag.simulatorFaults(
            accepted: "200", tooMany: "429 TooManyRequests", unavailable: "503 ServiceUnavailable")
        + [Flag.simulatorAllowPeer, Flag.help])

let usage = """
    usage: apns-sim [options]

    An APNs-faithful local gateway: the provider API (HTTP/2) and a device API (HTTP/1.1 + SSE).

    \(flags.help)

    Every option can also be set through APNS_SIM_<OPTION> (e.g. APNS_SIM_FAULT_SEED=7;
    repeatable options take a comma-separated list).
    """

func configuration(from arguments: Arguments) throws -> APNsSimulatorConfiguration {
    let listen = try HostPort(parsing: arguments.string("listen", default: "127.0.0.1:2197"))
    let deviceListen = try HostPort(parsing: arguments.string("device-listen", default: "127.0.0.1:2198"))
    let sandboxListen = try arguments.string("sandbox-listen").map { try HostPort(parsing: $0) }
    let tls = try arguments.simulatorTLSFiles()
    let keys = try arguments.all("provider-key").map { spec in
        do { return try ProviderKey(specification: spec) } catch { throw UsageError("\(error)") }
    }
    let goAwayAfter = try arguments.int("fault-goaway-after", default: 0)
    let budget = try arguments.int("background-budget", default: 3)
    let window = try arguments.double("background-window", default: 3600)
    guard goAwayAfter >= 0, budget >= 0, window > 0 else {
        throw UsageError("--fault-goaway-after and --background-budget must not be negative; the window positive")
    }
    let faults = APNsFaults(try arguments.simulatorFaults(), goAwayAfterStreams: goAwayAfter > 0 ? goAwayAfter : nil)
    var configuration = APNsSimulatorConfiguration(
        providerHost: listen.host, providerPort: Int(listen.port), tls: tls,
        sandboxHost: sandboxListen?.host ?? "127.0.0.1", sandboxPort: sandboxListen.map { Int($0.port) },
        deviceHost: deviceListen.host,
        devicePort: Int(deviceListen.port),
        deviceConnectionLimit: try arguments.int("device-connection-limit", default: 16_384),
        gateway: APNsGatewayConfiguration(
            providerKeys: keys, allowedTopics: Set(arguments.all("topic")), backgroundBudget: budget,
            backgroundWindow: window, faults: faults))
    configuration.allowedPeers = try arguments.simulatorAllowedPeers()
    return configuration
}

await runSimulator(name: "apns-sim", usage: usage, environmentPrefix: "APNS_SIM_", flags: flags) {
    let configuration = try configuration(from: $0)
    let server = APNsSimulatorServer(configuration: configuration)
    try server.start()
    if configuration.gateway.providerKeys.isEmpty {
        printError("apns-sim: no --provider-key given: every provider token will be refused")
    }
    let sandbox = configuration.sandboxPort == nil ? "" : "sandbox=\(configuration.sandboxHost):\(server.sandboxPort) "
    return (
        server,
        "provider=\(configuration.providerHost):\(server.providerPort) \(sandbox)"
            + "device=\(configuration.deviceHost):\(server.devicePort)"
    )
}
