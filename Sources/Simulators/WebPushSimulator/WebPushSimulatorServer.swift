import Durations
import HTTPServer
import Locking
import SimulatorSupport

/// The running webpush-sim: the push-resource listener (TLS; HTTP/2, and HTTP/1.1 relayed to an internal
/// cleartext server on loopback), the device and control API (HTTP/1.1), Mozilla's WebSocket push protocol when
/// asked for, and the periodic expiry of kept messages, all around one ``WebPushGateway``.
///
/// ```swift
/// let server = WebPushSimulatorServer(configuration: .init(providerPort: 0, devicePort: 0, mozillaHost: "127.0.0.1"))
/// try server.start()
/// print(server.providerPort, server.devicePort, server.mozillaPort)
/// await server.shutdown()
/// ```
public final class WebPushSimulatorServer: Sendable {
    /// The configuration the server was created with.
    public let configuration: WebPushSimulatorConfiguration
    /// The gateway logic behind every listener.
    public let gateway: WebPushGateway
    private let eventBatch = EventStreamBatch()
    private let running = RunningListeners()
    /// The Mozilla-protocol listener, while it runs.
    private let mozilla = LockedValue<WebSocketServer?>(nil)

    /// Creates a server; nothing listens until ``start()``.
    public init(configuration: WebPushSimulatorConfiguration, clock: any WallClock = SystemClock()) {
        self.configuration = configuration
        var gatewayConfiguration = configuration.gateway
        if let base = configuration.endpointBase { gatewayConfiguration.endpointBase = base }
        gateway = WebPushGateway(configuration: gatewayConfiguration, clock: clock)
    }

    /// Binds every listener and starts expiring kept messages.
    public func start() throws(SimulatorError) {
        let gateway = gateway
        let listeners = try SimulatorListeners.start(
            configuration, gateway: gateway, router: DeviceAPI.router(for: gateway, batch: eventBatch),
            batch: eventBatch,
            // Browser vendors' push services speak HTTP/1.1 to a client that offers no ALPN (requests, aiohttp,
            // curl without --http2), as any web server does.
            relaysClientsWithoutALPN: true,
            // A UnifiedPush distributor is often a self-hosted server speaking HTTP/1.1 only.
            offersHTTP2: configuration.gateway.distributor == nil,
            providerBound: { port in
                guard configuration.endpointBase == nil else { return }
                let host =
                    configuration.providerHost.contains(":")
                    ? "[\(configuration.providerHost)]" : configuration.providerHost
                gateway.setEndpointBase("\(configuration.tls == nil ? "http" : "https")://\(host):\(port)")
            })
        var mozilla: WebSocketServer?
        if let host = configuration.mozillaHost {
            let server = WebSocketServer(
                handlers: WebSocketHandlers(
                    opened: { gateway.mozillaOpened($0) }, received: { gateway.mozillaReceived($0, $1) },
                    closed: { gateway.mozillaClosed($0) }))
            gateway.setMozillaTransport(
                MozillaTransport(
                    send: { [weak server] connection, text in server?.send(text, to: connection) ?? false },
                    close: { [weak server] connection, status in server?.close(connection, status: status) }))
            do {
                try server.start(host: host, port: configuration.mozillaPort, protocolName: "push-notification")
            } catch {
                listeners.abandon()
                throw .listenerStartFailed("Mozilla push protocol: \(error)")
            }
            mozilla = server
        }
        self.mozilla.withLock { $0 = mozilla }
        running.keep(listeners)
    }

    /// The bound push-resource port (`0` before ``start()``).
    public var providerPort: Int { running.providerPort }

    /// The bound device-API port (`0` before ``start()``).
    public var devicePort: Int { running.devicePort }

    /// The bound Mozilla-protocol port (`0` before ``start()`` or without that listener).
    public var mozillaPort: Int { mozilla.withLock { $0?.port.withLock { $0 } ?? 0 } }

    /// Stops every listener: GOAWAY to HTTP/2 senders, message streams and sockets closed.
    public func shutdown() async {
        let (mozilla, gateway) = (mozilla, gateway)
        await running.shutdown {
            await mozilla.withLock { server in
                defer { server = nil }
                return server
            }?.shutdown()
            gateway.setMozillaTransport(nil)
        }
    }
}

extension WebPushSimulatorConfiguration: SimulatorListenerConfiguration {}
extension WebPushSimulatorServer: SimulatorProcess {}
