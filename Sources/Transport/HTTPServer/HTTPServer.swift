import Foundation

/// An HTTP/1.1 server (optionally over TLS) that runs async handlers and Server-Sent Events streams.
///
/// ```swift
/// var router = Router()
/// router.get("/v1/messages/:id") { request in
///     try .json(Message(id: request.parameter("id")!))
/// }
/// let server = try HTTPServer(configuration: .init(port: 8443), router: router)
/// print(server.port)
/// await server.shutdown()
/// ```
///
/// The server starts listening in `init` and keeps running until `shutdown()` (or until it is released).
public final class HTTPServer: Sendable {
    /// The configuration the server was started with.
    public let configuration: Configuration
    /// The bound TCP port (the real one when the configuration asked for port 0).
    public let port: UInt16
    private let core: ServerCore

    /// Starts a server that answers every request with `handler`.
    /// Throws `HTTPServer.StartError` when the address cannot be bound or the TLS files are unusable.
    public convenience init(configuration: Configuration, handler: @escaping HTTPHandler) throws {
        try self.init(configuration: configuration) { request, respond in
            Router.answerInTask(request, respond: respond, with: handler)
        }
    }

    /// Starts a server that dispatches requests through `router` (its inline routes on the server's thread).
    public convenience init(configuration: Configuration, router: Router) throws {
        try self.init(configuration: configuration, dispatch: router.dispatch)
    }

    private init(configuration: Configuration, dispatch: @escaping ServerCore.Dispatch) throws {
        self.configuration = configuration
        let core = ServerCore(configuration: configuration, dispatch: dispatch)
        self.core = core
        self.port = try core.start()
    }

    /// Serves the certificate chain and key in the configured files, read again (a renewed certificate), to every
    /// new TLS connection; connections already open keep the one they have. Throws, and serves what it served,
    /// when a file cannot be read or used (not PEM, the key not the certificate's).
    public func reloadTLS() throws(StartError) {
        guard let tls = configuration.tls else { throw .startFailed("this server does not serve TLS") }
        try core.reloadTLS(certificatePath: tls.certificatePath, privateKeyPath: tls.privateKeyPath)
    }

    /// Whether the server stopped or is stopping.
    public var isShuttingDown: Bool { core.lifecycle.withLock { $0 != .running } }

    /// The number of requests whose handler runs or whose response is still being sent.
    public var inFlightCount: Int { core.inFlightCount }

    /// The number of open event streams.
    public var eventStreamCount: Int { core.eventStreamCount }

    /// Stops gracefully: stops accepting connections, closes event streams, lets in-flight requests
    /// finish (up to `shutdownGracePeriod`, then answers them with 503), and stops the daemon.
    /// Safe to call more than once; later calls wait for the first to finish.
    public func shutdown() async {
        guard core.beginShutdown() else {
            while core.lifecycle.withLock({ $0 }) != .stopped {
                try? await Task.sleep(for: .milliseconds(10))
            }
            return
        }
        core.quiesce()
        let deadline = ContinuousClock.now + configuration.shutdownGracePeriod
        while core.inFlightCount > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        if core.inFlightCount > 0 {
            core.abandonInFlight()
            let last = ContinuousClock.now + .seconds(2)
            while core.inFlightCount > 0, ContinuousClock.now < last {
                try? await Task.sleep(for: .milliseconds(10))
            }
            let unanswered = core.inFlightCount
            if unanswered > 0 { core.logError("stopping with \(unanswered) request(s) whose 503 was not sent") }
        }
        core.stopDaemon()
    }

    deinit {
        if core.beginShutdown() {
            core.quiesce()
            core.abandonInFlight()
            core.stopDaemon()
        }
    }
}
