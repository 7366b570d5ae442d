import ConnectionLoop
import Durations
import Foundation
import HTTP2Support
import Locking

/// An HTTP/2 server on nghttp2 and OpenSSL: TLS with ALPN `h2` (a TLS client that offers no ALPN is
/// spoken to in HTTP/2 too, as Apple's APNs gateways do; one that offers ALPN without `h2` is refused
/// with a `no_application_protocol` alert), or cleartext HTTP/2 with prior knowledge (h2c).
///
/// One event-loop thread (epoll, non-blocking sockets) serves every connection; an async handler runs
/// on the Swift concurrency pool and its response is handed back to the loop, an inline handler runs
/// on the loop thread itself.
///
/// ```swift
/// let server = HTTP2Server(configuration: .init(port: 0, tls: tls)) { request in
///     HTTP2Response(status: 200, body: Data("ok".utf8))
/// }
/// try server.start()
/// print(server.port)
/// await server.shutdown()
/// ```
public final class HTTP2Server: Sendable {
    private enum State {
        case idle
        case starting
        case running(EventLoop, port: Int)
        case stopped(EventLoop?, port: Int)
    }

    /// The configuration the server was created with.
    public let configuration: HTTP2ServerConfiguration
    private let handler: HandlerKind
    private let loopHooks: HTTP2LoopHooks?
    private let state = LockedValue(State.idle)

    /// Creates a server whose handler runs asynchronously; a thrown error becomes a `500` response.
    /// If the client goes away first, the handler's task is cancelled and its response dropped.
    /// `loopHooks` run on the event-loop thread around each round of socket events.
    public init(
        configuration: HTTP2ServerConfiguration, loopHooks: HTTP2LoopHooks? = nil,
        handler: @escaping @Sendable (HTTP2Request) async throws -> HTTP2Response
    ) {
        self.configuration = configuration
        self.loopHooks = loopHooks
        self.handler = .async(handler)
    }

    /// Creates a server whose handler runs synchronously on the event-loop thread: the fastest
    /// path, for handlers that answer at once and never block. `loopHooks` run on the event-loop thread
    /// around each round of socket events (so around every inline handler call of that round).
    public init(
        configuration: HTTP2ServerConfiguration, loopHooks: HTTP2LoopHooks? = nil,
        inlineHandler: @escaping @Sendable (HTTP2Request) -> HTTP2Response
    ) {
        self.configuration = configuration
        self.loopHooks = loopHooks
        self.handler = .inline(inlineHandler)
    }

    deinit {
        if case .running(let loop, _) = state.withLock({ $0 }) {
            loop.post(.shutdown(graceNanoseconds: 0))
        }
    }

    /// Loads the TLS files, binds the address and starts the event loop.
    /// Throws a descriptive ``HTTP2ServerError`` if any of that fails (port in use, bad certificate…).
    public func start() throws(HTTP2ServerError) {
        let mayStart = state.withLock { state -> Bool in
            guard case .idle = state else { return false }
            state = .starting
            return true
        }
        guard mayStart else { throw .alreadyStarted }
        do {
            let (loop, port) = try launch()
            state.withLock { $0 = .running(loop, port: port) }
        } catch {
            state.withLock { $0 = .idle }
            throw error
        }
    }

    private func launch() throws(HTTP2ServerError) -> (EventLoop, Int) {
        try validate(configuration)
        let tlsContext = try configuration.tls.map { tls throws(HTTP2ServerError) in
            try TLSContext(tls, alpn: TLSContext.ALPNPolicy(configuration.http1Relay))
        }
        let listener = try Listener.open(host: configuration.host, port: configuration.port)
        let loop: EventLoop
        do {
            loop = try EventLoop(
                configuration: configuration, handler: handler, hooks: loopHooks, tlsContext: tlsContext,
                listener: listener)
        } catch {
            close(listener.fd)
            throw error
        }
        Thread.start(named: "h2server-\(listener.port)") { loop.run() }
        return (loop, listener.port)
    }

    private func validate(_ configuration: HTTP2ServerConfiguration) throws(HTTP2ServerError) {
        if !(0...65_535).contains(configuration.port) {
            throw .invalidConfiguration(reason: "port \(configuration.port) is outside 0...65535")
        }
        if !(1...Int(Int32.max)).contains(configuration.maxConcurrentStreams) {
            throw .invalidConfiguration(reason: "maxConcurrentStreams must be at least 1")
        }
        if !(0...Int(Int32.max)).contains(configuration.initialWindowSize) {
            throw .invalidConfiguration(reason: "initialWindowSize must be within 0...2147483647")
        }
        if configuration.maxRequestBodySize < 0 {
            throw .invalidConfiguration(reason: "maxRequestBodySize must not be negative")
        }
    }

    /// The bound TCP port (useful with port `0`); `0` before ``start()``.
    public var port: Int {
        state.withLock { state in
            switch state {
            case .running(_, let port), .stopped(_, let port): return port
            case .idle, .starting: return 0
            }
        }
    }

    /// A snapshot of the server's counters.
    public var metrics: HTTP2ServerMetrics {
        let loop = state.withLock { state -> EventLoop? in
            switch state {
            case .running(let loop, _): return loop
            case .stopped(let loop, _): return loop
            case .idle, .starting: return nil
            }
        }
        return loop?.metrics.withLock { $0 } ?? HTTP2ServerMetrics()
    }

    /// Shuts down gracefully with the configured grace period: stops accepting, sends GOAWAY on every
    /// connection, lets in-flight streams finish within the grace period, then closes everything.
    /// Returns once the event loop has stopped; calling it again (or before start) returns at once.
    public func shutdown() async {
        await shutdown(gracePeriod: configuration.shutdownGracePeriod)
    }

    /// Like ``shutdown()`` with an explicit grace period for in-flight streams.
    public func shutdown(gracePeriod: Duration) async {
        let loop = state.withLock { state -> EventLoop? in
            switch state {
            case .running(let loop, let port):
                state = .stopped(loop, port: port)
                return loop
            case .stopped(let loop, _):
                return loop
            case .idle, .starting:
                return nil
            }
        }
        await loop?.shutdown(graceNanoseconds: gracePeriod.nanosecondsClamped)
    }
}
