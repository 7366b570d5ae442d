import CommandLineSupport
import FCMSimulator
import Foundation
import OpenSSLCrypto
import SimulatorSupport

// Before anything uses OpenSSL: no exit-time cleanup under threads still using it.
OpenSSLProcess.keepUntilExit()

/// Every flag fcm-sim takes, in the order its help lists them.
let flags = FlagTable(
    column: 34,
    [
        Flag("listen", "HOST:PORT", help: "provider API address (default 127.0.0.1:2297; port 0 picks one)")
    ]
        + Flag.simulatorTLS(h2c: "serve cleartext HTTP/2 only instead of TLS (no HTTP/1.1)")
        + Flag.simulatorDeviceAPI(default: "127.0.0.1:2298") + [
            Flag(
                "service-account", "FILE",
                help: "a Google service-account JSON to trust for its project_id",
                "(repeatable; its client_email is the issuer, its private_key's",
                "public half verifies the assertions)"),
            Flag("token-lifetime", "SECONDS", help: "lifetime of issued access tokens (default 3600)"),
            Flag("project-quota", "N", help: "sends per project per minute (default: no limit)"),
            Flag("device-rate", "N", help: "sends per device per minute (default 240; 0 = no limit)"),
            Flag("collapsible-burst", "N", help: "collapsible messages per device before the throttle (default 20)"),
            Flag("collapsible-refill-seconds", "S", help: "seconds to earn one more collapsible message (default 180)"),
        ]
        + Flag.simulatorFaults(accepted: "200", tooMany: "429 QUOTA_EXCEEDED", unavailable: "503 UNAVAILABLE")
        + [Flag.simulatorAllowPeer, Flag.help])

let usage = """
    usage: fcm-sim [options]

    A local Firebase Cloud Messaging (HTTP v1): the provider API (TLS; HTTP/2 and HTTP/1.1 on one port:
    POST /token and POST /v1/projects/{project}/messages:send) and a device API (HTTP/1.1 + SSE).

    \(flags.help)

    Every option can also be set through FCM_SIM_<OPTION> (e.g. FCM_SIM_TOKEN_LIFETIME=2;
    repeatable options take a comma-separated list).
    """

func configuration(from arguments: Arguments) throws -> FCMSimulatorConfiguration {
    let listen = try HostPort(parsing: arguments.string("listen", default: "127.0.0.1:2297"))
    let deviceListen = try HostPort(parsing: arguments.string("device-listen", default: "127.0.0.1:2298"))
    let tls = try arguments.simulatorTLSFiles()
    let accounts = try arguments.all("service-account").map { path in
        do { return try FCMServiceAccount(contentsOfFile: path) } catch { throw UsageError("\(error)") }
    }
    let lifetime = try arguments.int("token-lifetime", default: 3600)
    let quota = try arguments.int("project-quota", default: 0)
    let rate = try arguments.int("device-rate", default: 240)
    let burst = try arguments.int("collapsible-burst", default: 20)
    let refill = try arguments.double("collapsible-refill-seconds", default: 180)
    guard lifetime > 0, quota >= 0, rate >= 0, burst >= 0, refill > 0 else {
        throw UsageError("--token-lifetime and --collapsible-refill-seconds must be positive; counts not negative")
    }
    let faults = try arguments.simulatorFaults()
    var configuration = FCMSimulatorConfiguration(
        providerHost: listen.host, providerPort: Int(listen.port), tls: tls, deviceHost: deviceListen.host,
        devicePort: Int(deviceListen.port),
        deviceConnectionLimit: try arguments.int("device-connection-limit", default: 16_384),
        gateway: FCMGatewayConfiguration(
            serviceAccounts: accounts, tokenLifetime: lifetime, projectQuotaPerMinute: quota > 0 ? quota : nil,
            deviceRatePerMinute: rate > 0 ? rate : nil, collapsibleBurst: burst, collapsibleRefillSeconds: refill,
            faults: faults))
    configuration.allowedPeers = try arguments.simulatorAllowedPeers()
    return configuration
}

await runSimulator(name: "fcm-sim", usage: usage, environmentPrefix: "FCM_SIM_", flags: flags) {
    let configuration = try configuration(from: $0)
    let server = FCMSimulatorServer(configuration: configuration)
    try server.start()
    if configuration.gateway.serviceAccounts.isEmpty {
        printError("fcm-sim: no --service-account given: every token request will be refused")
    }
    return (
        server,
        "provider=\(configuration.providerHost):\(server.providerPort) "
            + "device=\(configuration.deviceHost):\(server.devicePort)"
    )
}
