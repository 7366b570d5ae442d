import Foundation
import HTTP2Server
import HTTPServer
import Locking
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
    private struct Running: Sendable {
        var provider: HTTP2Server
        var http1: HTTPServer?
        var device: HTTPServer
        var ticker: Task<Void, Never>
    }

    /// The configuration the server was created with.
    public let configuration: FCMSimulatorConfiguration
    /// The gateway logic behind both APIs.
    public let gateway: FCMGateway
    private let eventBatch = EventStreamBatch()
    private let running = LockedValue<Running?>(nil)

    /// Creates a server; nothing listens until ``start()``.
    public init(configuration: FCMSimulatorConfiguration, clock: any SimulatorClock = SystemClock()) {
        self.configuration = configuration
        gateway = FCMGateway(configuration: configuration.gateway, clock: clock)
    }

    /// Binds both listeners and starts processing delayed work.
    public func start() throws(SimulatorError) {
        let gateway = gateway
        var http1: HTTPServer?
        if configuration.tls != nil {
            do {
                http1 = try HTTPServer(
                    configuration: HTTPServer.Configuration(
                        host: "127.0.0.1", port: 0, tls: nil, threadCount: 2, idleTimeoutSeconds: 300,
                        shutdownGracePeriod: .seconds(2)),
                    handler: { request in
                        let response = gateway.handle(SimulatorProviderRequest(request))
                        if response.delay > .zero { try? await Task.sleep(for: response.delay) }
                        return HTTPResponse(response)
                    })
            } catch {
                throw .providerStartFailed("HTTP/1.1 relay target: \(error)")
            }
        }
        let tls = configuration.tls.map {
            HTTP2ServerConfiguration.TLS(certificateChainPath: $0.certificatePath, privateKeyPath: $0.privateKeyPath)
        }
        let batch = eventBatch
        let provider = HTTP2Server(
            configuration: HTTP2ServerConfiguration(
                host: configuration.providerHost, port: configuration.providerPort, tls: tls,
                maxConcurrentStreams: 1000, idleTimeout: .seconds(3600), shutdownGracePeriod: .seconds(2),
                http1Relay: http1.map { HTTP2ServerConfiguration.HTTP1Relay(port: Int($0.port)) }),
            loopHooks: HTTP2LoopHooks(willHandleEvents: { batch.begin() }, didHandleEvents: { batch.end() }),
            inlineHandler: { request in HTTP2Response(gateway.handle(SimulatorProviderRequest(request))) })
        do {
            try provider.start()
        } catch {
            if let http1 { Task { await http1.shutdown() } }
            throw .providerStartFailed(error.description)
        }
        let device: HTTPServer
        do {
            device = try HTTPServer(
                configuration: HTTPServer.Configuration(
                    host: configuration.deviceHost, port: UInt16(clamping: configuration.devicePort), tls: nil,
                    threadCount: 2, connectionLimit: configuration.deviceConnectionLimit,
                    connectionMemoryLimit: 16 * 1024, eventStreamHeartbeat: configuration.heartbeat,
                    shutdownGracePeriod: .seconds(2)),
                router: DeviceAPI.router(for: gateway, batch: eventBatch))
        } catch {
            Task {
                await provider.shutdown(gracePeriod: .zero)
                await http1?.shutdown()
            }
            throw .deviceStartFailed("\(error)")
        }
        let interval = configuration.tickInterval
        let ticker = Task.detached {
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                batch.run { gateway.processDueWork() }
            }
        }
        running.withLock { $0 = Running(provider: provider, http1: http1, device: device, ticker: ticker) }
    }

    /// The bound provider port (`0` before ``start()``).
    public var providerPort: Int { running.withLock { $0?.provider.port ?? 0 } }

    /// The bound device-API port (`0` before ``start()``).
    public var devicePort: Int { running.withLock { $0.map { Int($0.device.port) } ?? 0 } }

    /// Stops every listener: GOAWAY to HTTP/2 senders, message streams closed.
    public func shutdown() async {
        guard
            let current = running.withLock({ state -> Running? in
                defer { state = nil }
                return state
            })
        else { return }
        current.ticker.cancel()
        gateway.closeAllStreams()
        await current.provider.shutdown()
        await current.http1?.shutdown()
        await current.device.shutdown()
    }
}
