import HTTP2Server
import HTTPServer

/// Where ``SimulatorListeners`` listen: what they read from fcm-sim's and webpush-sim's configuration.
package protocol SimulatorListenerConfiguration: Sendable {
    /// The provider listener's address.
    var providerHost: String { get }
    /// The provider listener's port; `0` picks a free one.
    var providerPort: Int { get }
    /// TLS for the provider listener; `nil` serves cleartext HTTP/2 only (h2c, for tests).
    var tls: SimulatorTLSFiles? { get }
    /// The device API's address (HTTP/1.1).
    var deviceHost: String { get }
    /// The device API's port; `0` picks a free one.
    var devicePort: Int { get }
    /// The most simultaneous device-API connections (message streams included).
    var deviceConnectionLimit: Int { get }
    /// Interval of keep-alive comments on message streams.
    var heartbeat: Duration { get }
    /// How often the gateway's delayed work is processed.
    var tickInterval: Duration { get }
    /// The only source addresses the provider listener serves (`--allow-peer`); empty: every one.
    var allowedPeers: Set<String> { get }
}

/// The listeners fcm-sim and webpush-sim run around their gateway, started and stopped in one order: the
/// provider listener (TLS: HTTP/2, and HTTP/1.1 relayed to an internal cleartext server on loopback; or cleartext
/// HTTP/2 only), the device and control API (HTTP/1.1), and the periodic processing of delayed work.
package struct SimulatorListeners: Sendable {
    private let provider: HTTP2Server
    private let http1: HTTPServer?
    private let device: HTTPServer
    private let ticker: Task<Void, Never>
    private let closeAllStreams: @Sendable () -> Void

    /// The bound provider port.
    package var providerPort: Int { provider.port }

    /// The bound device-API port.
    package var devicePort: Int { Int(device.port) }

    /// Binds the provider listener, then the device API serving `router`, and starts processing `gateway`'s
    /// delayed work. Provider rounds and ticks run inside `batch`, so the device streams they feed wake once.
    /// `relaysClientsWithoutALPN` relays a TLS client that offers no ALPN to HTTP/1.1 too (as a web server
    /// would); `offersHTTP2: false` makes the provider listener HTTP/1.1 only (a self-hosted push server's);
    /// `providerBound` learns the provider port before the device API listens. A listener that fails stops those
    /// already started.
    package static func start(
        _ configuration: some SimulatorListenerConfiguration, gateway: some SimulatorGateway, router: Router,
        batch: EventStreamBatch, relaysClientsWithoutALPN: Bool = false, offersHTTP2: Bool = true,
        providerBound: (_ port: Int) -> Void = { _ in }
    ) throws(SimulatorError) -> SimulatorListeners {
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
        var providerConfiguration = HTTP2ServerConfiguration(
            host: configuration.providerHost, port: configuration.providerPort, tls: configuration.tls?.http2,
            maxConcurrentStreams: 1000, idleTimeout: .seconds(3600), shutdownGracePeriod: .seconds(2),
            http1Relay: http1.map {
                HTTP2ServerConfiguration.HTTP1Relay(
                    port: Int($0.port), includesClientsWithoutALPN: relaysClientsWithoutALPN,
                    offersHTTP2: offersHTTP2)
            })
        providerConfiguration.allowedPeers = configuration.allowedPeers
        let provider = HTTP2Server(
            configuration: providerConfiguration,
            loopHooks: HTTP2LoopHooks(willHandleEvents: { batch.begin() }, didHandleEvents: { batch.end() }),
            inlineHandler: { request in HTTP2Response(gateway.handle(SimulatorProviderRequest(request))) })
        do {
            try provider.start()
        } catch {
            if let http1 { Task { await http1.shutdown() } }
            throw .providerStartFailed(error.description)
        }
        providerBound(provider.port)
        let device: HTTPServer
        do {
            device = try HTTPServer(
                configuration: HTTPServer.Configuration(
                    host: configuration.deviceHost, port: UInt16(clamping: configuration.devicePort), tls: nil,
                    threadCount: 2, connectionLimit: configuration.deviceConnectionLimit,
                    connectionMemoryLimit: 16 * 1024, eventStreamHeartbeat: configuration.heartbeat,
                    shutdownGracePeriod: .seconds(2)),
                router: router)
        } catch {
            Task {
                await provider.shutdown(gracePeriod: .zero)
                await http1?.shutdown()
            }
            throw .deviceStartFailed("\(error)")
        }
        let ticker = DueWorkTicker.start(every: configuration.tickInterval, batch: batch) { gateway.processDueWork() }
        return SimulatorListeners(
            provider: provider, http1: http1, device: device, ticker: ticker,
            closeAllStreams: { gateway.closeAllStreams() })
    }

    /// Stops every listener at once (no grace period for senders), when a listener the simulator starts after
    /// them failed.
    package func abandon() {
        ticker.cancel()
        Task {
            await provider.shutdown(gracePeriod: .zero)
            await http1?.shutdown()
            await device.shutdown()
        }
    }

    /// Stops processing delayed work, closes every device stream, runs `stopOtherListeners` (the simulator's
    /// other listeners), then stops the provider listener (GOAWAY to HTTP/2 senders), its HTTP/1.1 relay target
    /// and the device API.
    package func shutdown(stopOtherListeners: () async -> Void = {}) async {
        ticker.cancel()
        closeAllStreams()
        await stopOtherListeners()
        await provider.shutdown()
        await http1?.shutdown()
        await device.shutdown()
    }
}
