import Durations
import HTTPServer
import SimulatorSupport

/// The running fcm-sim: the provider listener (TLS; HTTP/2, and HTTP/1.1 relayed to an internal cleartext
/// server on loopback), the device API (HTTP/1.1) and the periodic processing of delayed work, all around
/// one ``FCMGateway``.
///
/// ```swift
/// let server = FCMSimulatorServer(configuration: .init(providerPort: 0, devicePort: 0, gateway: …))
/// try server.start()
/// print(server.providerPort, server.devicePort)
/// await server.shutdown()
/// ```
public final class FCMSimulatorServer: Sendable {
    /// The configuration the server was created with.
    public let configuration: FCMSimulatorConfiguration
    /// The gateway logic behind both APIs.
    public let gateway: FCMGateway
    private let eventBatch = EventStreamBatch()
    private let running = RunningListeners()

    /// Creates a server; nothing listens until ``start()``.
    public init(configuration: FCMSimulatorConfiguration, clock: any WallClock = SystemClock()) {
        self.configuration = configuration
        gateway = FCMGateway(configuration: configuration.gateway, clock: clock)
    }

    /// Binds both listeners and starts processing delayed work.
    public func start() throws(SimulatorError) {
        let listeners = try SimulatorListeners.start(
            configuration, gateway: gateway, router: DeviceAPI.router(for: gateway, batch: eventBatch),
            batch: eventBatch)
        running.keep(listeners)
    }

    /// The bound provider port (`0` before ``start()``).
    public var providerPort: Int { running.providerPort }

    /// The bound device-API port (`0` before ``start()``).
    public var devicePort: Int { running.devicePort }

    /// Stops every listener: GOAWAY to HTTP/2 senders, message streams closed.
    public func shutdown() async { await running.shutdown() }
}

extension FCMSimulatorConfiguration: SimulatorListenerConfiguration {}
extension FCMSimulatorServer: SimulatorProcess {}
