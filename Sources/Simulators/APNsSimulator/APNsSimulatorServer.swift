import Durations
import Foundation
import HTTP2Server
import HTTPServer
import Locking
import SimulatorSupport

/// The running simulator: the provider API (HTTP/2, TLS or h2c), the device API (HTTP/1.1) and the
/// periodic processing of delayed work, all around one ``APNsGateway``.
///
/// ```swift
/// let server = APNsSimulatorServer(configuration: .init(providerPort: 0, devicePort: 0))
/// try await server.start()
/// print(server.providerPort, server.devicePort)
/// await server.shutdown()
/// ```
public final class APNsSimulatorServer: Sendable {
    private struct Running: Sendable {
        var provider: HTTP2Server
        var sandbox: HTTP2Server?
        var device: HTTPServer
        var ticker: Task<Void, Never>
    }

    /// The configuration the server was created with.
    public let configuration: APNsSimulatorConfiguration
    /// The gateway logic behind both APIs.
    public let gateway: APNsGateway
    /// Groups the notification-stream wake-ups of each round of provider requests (and of each tick).
    private let eventBatch = EventStreamBatch()
    private let running = LockedValue<Running?>(nil)

    /// Creates a server; nothing listens until ``start()``.
    public init(configuration: APNsSimulatorConfiguration, clock: any WallClock = SystemClock()) {
        self.configuration = configuration
        gateway = APNsGateway(configuration: configuration.gateway, clock: clock)
    }

    /// Binds both APIs and starts processing delayed work.
    /// Throws ``SimulatorError`` when an address cannot be bound or the TLS files are unusable.
    public func start() throws(SimulatorError) {
        let sandboxPort = configuration.sandboxPort
        let provider = makeProviderServer(
            host: configuration.providerHost, port: configuration.providerPort,
            environment: sandboxPort == nil ? nil : .production)
        do {
            try provider.start()
        } catch {
            throw .providerStartFailed(error.description)
        }
        var sandbox: HTTP2Server?
        if let sandboxPort {
            let server = makeProviderServer(host: configuration.sandboxHost, port: sandboxPort, environment: .sandbox)
            do {
                try server.start()
            } catch {
                Task { await provider.shutdown(gracePeriod: .zero) }
                throw .providerStartFailed("sandbox listener: \(error.description)")
            }
            sandbox = server
        }
        let device: HTTPServer
        do {
            device = try HTTPServer(
                configuration: HTTPServer.Configuration(
                    host: configuration.deviceHost, port: UInt16(clamping: configuration.devicePort), tls: nil,
                    threadCount: configuration.deviceThreads, connectionLimit: configuration.deviceConnectionLimit,
                    // Device requests are small (a registration's JSON, a stream's GET): 8 KiB per connection
                    // instead of libmicrohttpd's 32 KiB keeps 10,000 connected devices in a third of the memory.
                    connectionMemoryLimit: 8 * 1024, eventStreamHeartbeat: configuration.heartbeat,
                    shutdownGracePeriod: .seconds(2)),
                router: DeviceAPI.router(for: gateway, batch: eventBatch))
        } catch {
            let providers = [provider] + (sandbox.map { [$0] } ?? [])
            Task { for server in providers { await server.shutdown(gracePeriod: .zero) } }
            throw .deviceStartFailed("\(error)")
        }
        let gateway = gateway
        let ticker = DueWorkTicker.start(every: configuration.tickInterval, batch: eventBatch) {
            gateway.processDueWork()
        }
        running.withLock {
            $0 = Running(provider: provider, sandbox: sandbox, device: device, ticker: ticker)
        }
    }

    /// A provider listener for `environment` (`nil`: both).
    private func makeProviderServer(host: String, port: Int, environment: APNsEnvironment?) -> HTTP2Server {
        var serverConfiguration = HTTP2ServerConfiguration(
            host: host, port: port, tls: configuration.tls?.http2, maxConcurrentStreams: 1000,
            idleTimeout: .seconds(3600), shutdownGracePeriod: .seconds(2))
        serverConfiguration.allowedPeers = configuration.allowedPeers
        let gateway = gateway
        let batch = eventBatch
        // Inline handlers run inside the loop's rounds: notifications a round delivers wake the device
        // API's workers once, after the round's responses are written. A latency fault holds the response
        // back without holding the loop (HTTP2Response.delay).
        let hooks = HTTP2LoopHooks(willHandleEvents: { batch.begin() }, didHandleEvents: { batch.end() })
        return HTTP2Server(
            configuration: serverConfiguration, loopHooks: hooks,
            inlineHandler: { request in
                HTTP2Response(gateway.handle(APNsProviderRequest(request, environment: environment)))
            })
    }

    /// The bound (production) provider-API port (`0` before ``start()``).
    public var providerPort: Int { running.withLock { $0?.provider.port ?? 0 } }

    /// The bound sandbox provider-API port (`0` before ``start()`` or without a sandbox listener).
    public var sandboxPort: Int { running.withLock { $0?.sandbox?.port ?? 0 } }

    /// The bound device-API port (`0` before ``start()``).
    public var devicePort: Int { running.withLock { $0.map { Int($0.device.port) } ?? 0 } }

    /// Stops both APIs gracefully: GOAWAY to providers, notification streams closed.
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
        await current.sandbox?.shutdown()
        await current.device.shutdown()
    }
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
