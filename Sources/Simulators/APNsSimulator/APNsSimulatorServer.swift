import Durations
import Foundation
import HTTP2Server
import HTTPServer
import SimulatorSupport

/// The running simulator: the provider API (HTTP/2, TLS or h2c; a sandbox listener beside it when asked for), the
/// device API (HTTP/1.1) and the periodic processing of delayed work, all around one ``APNsGateway``, on the
/// simulators' shared ``SimulatorListeners``.
///
/// ```swift
/// let server = APNsSimulatorServer(configuration: .init(providerPort: 0, devicePort: 0))
/// try await server.start()
/// print(server.providerPort, server.devicePort)
/// await server.shutdown()
/// ```
public final class APNsSimulatorServer: Sendable {
    /// The configuration the server was created with.
    public let configuration: APNsSimulatorConfiguration
    /// The gateway logic behind both APIs.
    public let gateway: APNsGateway
    /// Groups the notification-stream wake-ups of each round of provider requests (and of each tick).
    private let eventBatch = EventStreamBatch()
    private let running = RunningListeners()

    /// Creates a server; nothing listens until ``start()``.
    public init(configuration: APNsSimulatorConfiguration, clock: any WallClock = SystemClock()) {
        self.configuration = configuration
        gateway = APNsGateway(configuration: configuration.gateway, clock: clock)
    }

    /// Binds both APIs and starts processing delayed work: the production provider listener (both environments
    /// when there is no sandbox listener), the sandbox one if asked for, then the device API.
    /// Throws ``SimulatorError`` when an address cannot be bound or the TLS files are unusable.
    public func start() throws(SimulatorError) {
        let gateway = gateway
        // A listener for `environment` (`nil`: both).
        let provider = { (host: String, port: Int, label: String?, environment: APNsEnvironment?) in
            SimulatorListeners.Provider(host: host, port: port, label: label) { request in
                HTTP2Response(gateway.handle(APNsProviderRequest(request, environment: environment)))
            }
        }
        var providers = [
            provider(
                configuration.providerHost, configuration.providerPort, nil,
                configuration.sandboxPort == nil ? nil : .production)
        ]
        if let sandboxPort = configuration.sandboxPort {
            providers.append(
                provider(configuration.sandboxHost, sandboxPort, "sandbox listener", .sandbox))
        }
        let listeners = try SimulatorListeners.start(
            providers: providers, tls: configuration.tls, allowedPeers: configuration.allowedPeers,
            device: SimulatorListeners.Device(
                host: configuration.deviceHost, port: configuration.devicePort, threads: configuration.deviceThreads,
                connectionLimit: configuration.deviceConnectionLimit,
                // Device requests are small (a registration's JSON, a stream's GET): 8 KiB per connection
                // instead of libmicrohttpd's 32 KiB keeps 10,000 connected devices in a third of the memory.
                connectionMemoryLimit: 8 * 1024, heartbeat: configuration.heartbeat,
                router: DeviceAPI.router(for: gateway, batch: eventBatch)),
            tickInterval: configuration.tickInterval, batch: eventBatch,
            processDueWork: { gateway.processDueWork() }, closeAllStreams: { gateway.closeAllStreams() })
        running.keep(listeners)
    }

    /// The bound (production) provider-API port (`0` before ``start()``).
    public var providerPort: Int { running.providerPort }

    /// The bound sandbox provider-API port (`0` before ``start()`` or without a sandbox listener).
    public var sandboxPort: Int { running.providerPorts.dropFirst().first ?? 0 }

    /// The bound device-API port (`0` before ``start()``).
    public var devicePort: Int { running.devicePort }

    /// Stops both APIs gracefully: GOAWAY to providers, notification streams closed.
    public func shutdown() async { await running.shutdown() }
}

extension APNsProviderRequest {
    init(_ request: HTTP2Request, environment: APNsEnvironment?) {
        self.init(
            method: request.method, path: request.path, headers: request.headers,
            body: request.body, connectionID: request.connectionID, environment: environment)
    }
}

extension HTTP2Response {
    init(_ response: APNsProviderResponse) {
        var headers = [HTTPField("apns-id", response.apnsID)]
        if let uniqueID = response.uniqueID { headers.append(HTTPField("apns-unique-id", uniqueID)) }
        let body = response.body
        if !body.isEmpty { headers.append(HTTPField("content-type", "application/json")) }
        self.init(
            status: response.status, headers: headers, body: body,
            goAway: response.goAway ? HTTP2GoAway(errorCode: 0, debugData: Data(#"{"reason":"Shutdown"}"#.utf8)) : nil,
            delay: response.delay)
    }
}
extension APNsSimulatorServer: SimulatorProcess {}
