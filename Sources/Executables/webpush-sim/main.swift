import CommandLineSupport
import Foundation
import OpenSSLCrypto
import SimulatorSupport
import WebPushSimulator

// Before anything uses OpenSSL: no exit-time cleanup under threads still using it.
OpenSSLProcess.keepUntilExit()

/// Every flag webpush-sim takes, in the order its help lists them.
let flags = FlagTable(
    column: 34,
    [
        Flag("listen", "HOST:PORT", help: "push resources (default 127.0.0.1:2201; port 0 picks one)")
    ]
        + Flag.simulatorTLS(listener: "push-resource", h2c: "serve cleartext HTTP/2 only instead of TLS (no HTTP/1.1)")
        + Flag.simulatorDeviceAPI(default: "127.0.0.1:2202", what: "device and control API") + [
            Flag("mozilla-listen", "HOST:PORT", help: "Mozilla WebSocket push protocol, plain ws (default: none)"),
            Flag(
                "endpoint-base", "URL",
                help: "what push endpoints start with (default https://<listen address>);",
                "the VAPID aud must be its origin"),
            Flag("max-ttl", "SECONDS", help: "longest TTL kept (default 5184000, 60 days)"),
            Flag(
                "distributor", "NAME",
                help: "answer as a UnifiedPush distributor instead of a browser's push service: ntfy (HTTP/1.1 only, "
                    + "200 with the message, ntfy's errors and request budget, no Topic replacement)"),
        ]
        + Flag.simulatorFaults(accepted: "201", tooMany: "429", unavailable: "503", answers: "push")
        + [Flag.simulatorAllowPeer, Flag.help])

let usage = """
    usage: webpush-sim [options]

    A local Web Push service (RFC 8030, 8291, 8292): push resources (TLS; HTTP/2 and HTTP/1.1 on one port),
    a device and control API where a simulated browser subscribes and reads its decrypted messages (HTTP/1.1 +
    SSE), and optionally Mozilla's WebSocket push protocol for Firefox (dom.push.serverURL).

    \(flags.help)

    Every option can also be set through WEBPUSH_SIM_<OPTION> (e.g. WEBPUSH_SIM_MOZILLA_LISTEN=127.0.0.1:2203).
    """

func configuration(from arguments: Arguments) throws -> WebPushSimulatorConfiguration {
    let listen = try HostPort(parsing: arguments.string("listen", default: "127.0.0.1:2201"))
    let deviceListen = try HostPort(parsing: arguments.string("device-listen", default: "127.0.0.1:2202"))
    let mozillaListen = try arguments.string("mozilla-listen").map { try HostPort(parsing: $0) }
    let tls = try arguments.simulatorTLSFiles()
    var endpointBase = arguments.string("endpoint-base")
    if let base = endpointBase {
        guard let components = URLComponents(string: base), ["https", "http"].contains(components.scheme ?? ""),
            components.host?.isEmpty == false, components.query == nil
        else { throw UsageError("--endpoint-base must be an absolute https URL, e.g. https://webpush-sim:2201") }
        endpointBase = base
    }
    let maxTTL = try arguments.int("max-ttl", default: 60 * 86_400)
    let connections = try arguments.int("device-connection-limit", default: 16_384)
    guard maxTTL >= 0, connections > 0 else {
        throw UsageError("--max-ttl must not be negative; --device-connection-limit positive")
    }
    let faults = try arguments.simulatorFaults()
    var distributor: WebPushDistributor?
    if let name = arguments.string("distributor") {
        guard let known = WebPushDistributor(rawValue: name) else {
            throw UsageError(
                "--distributor must be one of: "
                    + WebPushDistributor.allCases.map(\.rawValue).joined(separator: ", "))
        }
        guard tls != nil else { throw UsageError("--distributor needs TLS (--tls-cert and --tls-key), not --h2c") }
        distributor = known
    }
    var configuration = WebPushSimulatorConfiguration(
        providerHost: listen.host, providerPort: Int(listen.port), tls: tls, deviceHost: deviceListen.host,
        devicePort: Int(deviceListen.port), mozillaHost: mozillaListen?.host,
        mozillaPort: Int(mozillaListen?.port ?? 0), deviceConnectionLimit: connections, endpointBase: endpointBase,
        gateway: WebPushGatewayConfiguration(maxTTL: maxTTL, faults: faults, distributor: distributor))
    configuration.allowedPeers = try arguments.simulatorAllowedPeers()
    return configuration
}

await runSimulator(name: "webpush-sim", usage: usage, environmentPrefix: "WEBPUSH_SIM_", flags: flags) {
    let configuration = try configuration(from: $0)
    let server = WebPushSimulatorServer(configuration: configuration)
    try server.start()
    var line =
        "provider=\(configuration.providerHost):\(server.providerPort) "
        + "device=\(configuration.deviceHost):\(server.devicePort)"
    if let host = configuration.mozillaHost { line += " mozilla=\(host):\(server.mozillaPort)" }
    return (server, line + " endpoint-base=\(server.gateway.endpointBase)")
}
