import HTTP2Server
import HTTPServer
import Locking

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

/// The listeners every simulator runs around its gateway, started and stopped in one order: the provider
/// listeners (TLS: HTTP/2, optionally with HTTP/1.1 relayed to an internal cleartext server on loopback; or cleartext
/// HTTP/2 only), the device and control API (HTTP/1.1), and the periodic processing of delayed work. apns-sim has two
/// provider listeners (production and sandbox), fcm-sim and webpush-sim one with the HTTP/1.1 relay.
package struct SimulatorListeners: Sendable {
    /// One provider listener: where it listens and how it answers an HTTP/2 request (inside the listener's loop
    /// round, which the batch brackets).
    package struct Provider: Sendable {
        /// Its address.
        package var host: String
        /// Its port; `0` picks a free one.
        package var port: Int
        /// What a failure to start it is called (`sandbox listener`); `nil`: the provider API itself.
        package var label: String?
        /// The answer to each request.
        package var answer: @Sendable (HTTP2Request) -> HTTP2Response

        /// A listener on `host:port` answering with `answer`.
        package init(
            host: String, port: Int, label: String? = nil, answer: @escaping @Sendable (HTTP2Request) -> HTTP2Response
        ) {
            self.host = host
            self.port = port
            self.label = label
            self.answer = answer
        }
    }

    /// HTTP/1.1 on a TLS provider listener: relayed to a cleartext server on loopback that answers with `answer`.
    package struct Relay: Sendable {
        /// The answer to each request.
        package var answer: @Sendable (HTTPRequest) async -> HTTPResponse
        /// A TLS client that offers no ALPN is relayed too (as a web server would answer it).
        package var includesClientsWithoutALPN: Bool
        /// The listener offers `h2` at all (`false`: HTTP/1.1 only, a self-hosted push server's).
        package var offersHTTP2: Bool
    }

    /// The device and control API's listener (HTTP/1.1, cleartext).
    package struct Device: Sendable {
        /// Its address.
        package var host: String
        /// Its port; `0` picks a free one.
        package var port: Int
        /// libmicrohttpd's threads.
        package var threads: Int
        /// The most simultaneous connections (streams included).
        package var connectionLimit: Int
        /// libmicrohttpd's memory pool per connection.
        package var connectionMemoryLimit: Int
        /// Interval of keep-alive comments on streams.
        package var heartbeat: Duration
        /// The routes.
        package var router: Router

        /// A device API on `host:port` serving `router`.
        package init(
            host: String, port: Int, threads: Int = 2, connectionLimit: Int, connectionMemoryLimit: Int = 16 * 1024,
            heartbeat: Duration, router: Router
        ) {
            self.host = host
            self.port = port
            self.threads = threads
            self.connectionLimit = connectionLimit
            self.connectionMemoryLimit = connectionMemoryLimit
            self.heartbeat = heartbeat
            self.router = router
        }
    }

    private let providers: [HTTP2Server]
    private let http1: HTTPServer?
    private let device: HTTPServer
    private let ticker: Task<Void, Never>
    private let closeAllStreams: @Sendable () -> Void

    /// The first provider listener's bound port.
    package var providerPort: Int { providers[0].port }

    /// Each provider listener's bound port, in the order they were given.
    package var providerPorts: [Int] { providers.map(\.port) }

    /// The bound device-API port.
    package var devicePort: Int { Int(device.port) }

    /// fcm-sim's and webpush-sim's listeners: one provider listener whose HTTP/2 and HTTP/1.1 requests (with TLS)
    /// `gateway` answers, and the device API serving `router`. `relaysClientsWithoutALPN` relays a TLS client that
    /// offers no ALPN to HTTP/1.1 too (as a web server would); `offersHTTP2: false` makes the provider listener
    /// HTTP/1.1 only (a self-hosted push server's); `providerBound` learns the provider port before the device API
    /// listens.
    package static func start(
        _ configuration: some SimulatorListenerConfiguration, gateway: some SimulatorGateway, router: Router,
        batch: EventStreamBatch, relaysClientsWithoutALPN: Bool = false, offersHTTP2: Bool = true,
        providerBound: (_ port: Int) -> Void = { _ in }
    ) throws(SimulatorError) -> SimulatorListeners {
        try start(
            providers: [
                Provider(host: configuration.providerHost, port: configuration.providerPort) { request in
                    HTTP2Response(gateway.handle(SimulatorProviderRequest(request)))
                }
            ],
            tls: configuration.tls, allowedPeers: configuration.allowedPeers,
            relay: Relay(
                answer: { request in
                    let response = gateway.handle(SimulatorProviderRequest(request))
                    if response.delay > .zero { try? await Task.sleep(for: response.delay) }
                    return HTTPResponse(response)
                }, includesClientsWithoutALPN: relaysClientsWithoutALPN, offersHTTP2: offersHTTP2),
            device: Device(
                host: configuration.deviceHost, port: configuration.devicePort,
                connectionLimit: configuration.deviceConnectionLimit, heartbeat: configuration.heartbeat,
                router: router),
            tickInterval: configuration.tickInterval, batch: batch, processDueWork: { gateway.processDueWork() },
            closeAllStreams: { gateway.closeAllStreams() }, providerBound: { providerBound($0[0]) })
    }

    /// Binds the provider listeners in order (with TLS and a `relay`, each relays HTTP/1.1 to one internal
    /// cleartext server), then the device API, and starts calling `processDueWork` every `tickInterval`. Provider
    /// rounds and ticks run inside `batch`, so the device streams they feed wake once. `providerBound` learns the
    /// provider ports before the device API listens. A listener that fails stops those already started.
    package static func start(
        providers: [Provider], tls: SimulatorTLSFiles?, allowedPeers: Set<String>, relay: Relay? = nil,
        device: Device, tickInterval: Duration, batch: EventStreamBatch,
        processDueWork: @escaping @Sendable () -> Void, closeAllStreams: @escaping @Sendable () -> Void,
        providerBound: (_ ports: [Int]) -> Void = { _ in }
    ) throws(SimulatorError) -> SimulatorListeners {
        precondition(!providers.isEmpty, "a simulator has a provider listener")
        var http1: HTTPServer?
        if tls != nil, let relay {
            do {
                http1 = try HTTPServer(
                    configuration: HTTPServer.Configuration(
                        host: "127.0.0.1", port: 0, tls: nil, threadCount: 2, idleTimeoutSeconds: 300,
                        shutdownGracePeriod: .seconds(2)),
                    handler: relay.answer)
            } catch {
                throw .providerStartFailed("HTTP/1.1 relay target: \(error)")
            }
        }
        var started: [HTTP2Server] = []
        let stopStarted = { [http1] (servers: [HTTP2Server]) -> Void in
            Task {
                for server in servers { await server.shutdown(gracePeriod: .zero) }
                await http1?.shutdown()
            }
        }
        for provider in providers {
            var configuration = HTTP2ServerConfiguration(
                host: provider.host, port: provider.port, tls: tls?.http2, maxConcurrentStreams: 1000,
                idleTimeout: .seconds(3600), shutdownGracePeriod: .seconds(2),
                http1Relay: http1.flatMap { server in
                    relay.map {
                        HTTP2ServerConfiguration.HTTP1Relay(
                            port: Int(server.port), includesClientsWithoutALPN: $0.includesClientsWithoutALPN,
                            offersHTTP2: $0.offersHTTP2)
                    }
                })
            configuration.allowedPeers = allowedPeers
            // Inline handlers run inside the loop's rounds: what a round delivers wakes the device API's workers
            // once, after the round's responses are written. A latency fault holds a response back without holding
            // the loop (HTTP2Response.delay).
            let server = HTTP2Server(
                configuration: configuration,
                loopHooks: HTTP2LoopHooks(willHandleEvents: { batch.begin() }, didHandleEvents: { batch.end() }),
                inlineHandler: provider.answer)
            do {
                try server.start()
            } catch {
                stopStarted(started)
                throw .providerStartFailed(provider.label.map { "\($0): \(error.description)" } ?? error.description)
            }
            started.append(server)
        }
        providerBound(started.map(\.port))
        let deviceServer: HTTPServer
        do {
            deviceServer = try HTTPServer(
                configuration: HTTPServer.Configuration(
                    host: device.host, port: UInt16(clamping: device.port), tls: nil, threadCount: device.threads,
                    connectionLimit: device.connectionLimit, connectionMemoryLimit: device.connectionMemoryLimit,
                    eventStreamHeartbeat: device.heartbeat, shutdownGracePeriod: .seconds(2)),
                router: device.router)
        } catch {
            stopStarted(started)
            throw .deviceStartFailed("\(error)")
        }
        let ticker = DueWorkTicker.start(every: tickInterval, batch: batch, processDueWork)
        return SimulatorListeners(
            providers: started, http1: http1, device: deviceServer, ticker: ticker, closeAllStreams: closeAllStreams)
    }

    /// Stops every listener at once (no grace period for senders), when a listener the simulator starts after
    /// them failed.
    package func abandon() {
        ticker.cancel()
        Task {
            for provider in providers { await provider.shutdown(gracePeriod: .zero) }
            await http1?.shutdown()
            await device.shutdown()
        }
    }

    /// Stops processing delayed work, closes every device stream, runs `stopOtherListeners` (the simulator's
    /// other listeners), then stops the provider listeners (GOAWAY to HTTP/2 senders), the HTTP/1.1 relay target
    /// and the device API.
    package func shutdown(stopOtherListeners: () async -> Void = {}) async {
        ticker.cancel()
        closeAllStreams()
        await stopOtherListeners()
        for provider in providers { await provider.shutdown() }
        await http1?.shutdown()
        await device.shutdown()
    }
}

/// A simulator server's listeners while it runs: none before `start()` and after `shutdown()`.
package final class RunningListeners: Sendable {
    private let current = LockedValue<SimulatorListeners?>(nil)

    /// None yet.
    package init() {}

    /// Keeps `listeners` as the running ones.
    package func keep(_ listeners: SimulatorListeners) { current.withLock { $0 = listeners } }

    /// The first provider listener's bound port (`0` when none runs).
    package var providerPort: Int { current.withLock { $0?.providerPort ?? 0 } }

    /// Each provider listener's bound port (empty when none runs).
    package var providerPorts: [Int] { current.withLock { $0?.providerPorts ?? [] } }

    /// The bound device-API port (`0` when none runs).
    package var devicePort: Int { current.withLock { $0?.devicePort ?? 0 } }

    /// Stops the running listeners, once (see ``SimulatorListeners/shutdown(stopOtherListeners:)``); nothing when
    /// none runs.
    package func shutdown(stopOtherListeners: () async -> Void = {}) async {
        guard
            let listeners = current.withLock({ state -> SimulatorListeners? in
                defer { state = nil }
                return state
            })
        else { return }
        await listeners.shutdown(stopOtherListeners: stopOtherListeners)
    }
}
