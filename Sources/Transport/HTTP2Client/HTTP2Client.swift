import Foundation
import Synchronization

/// An HTTP/2 client for one origin, on nghttp2 and OpenSSL: every request is a stream on one shared,
/// multiplexed connection, opened on the first request and replaced when it breaks or the server sends GOAWAY.
///
/// One I/O thread owns the socket, the TLS engine and the nghttp2 session; requests from any task are handed to
/// it and batched, so a burst of requests leaves in a few TLS records and system calls. The client honours the
/// server's `SETTINGS_MAX_CONCURRENT_STREAMS` (no request is sent before the server's SETTINGS arrive), retries a
/// request the server refused unprocessed with GOAWAY once on a new connection, and never retries anything else.
///
/// ```swift
/// let client = HTTP2Client(configuration: .init(baseURL: "https://127.0.0.1:8443", tls: .init(caFile: "ca.pem")))
/// let response = try await client.execute(.init(method: "POST", path: "/3/device/ab12", body: Array(json.utf8)))
/// ```
public final class HTTP2Client: Sendable {
    /// The configuration the client was created with.
    public let configuration: Configuration
    private let loop: ClientLoop

    /// Creates a client; nothing is opened until the first request. An unusable base URL makes every request
    /// fail with ``HTTPClientError/invalidRequest(_:)``.
    public init(configuration: Configuration) {
        precondition(configuration.maximumConcurrentStreams > 0, "maximumConcurrentStreams must be positive")
        self.configuration = configuration
        loop = ClientLoop(configuration: configuration)
        loop.start()
    }

    deinit {
        loop.shutdown()
    }

    /// Sends `request` and returns the complete response (any status). Throws ``HTTPClientError``.
    public func execute(_ request: Request) async throws(HTTPClientError) -> Response {
        let timeout = request.timeout ?? configuration.requestTimeout
        let pending = PendingRequest(request: request, timeout: timeout)
        let result = await withTaskCancellationHandler {
            // Unchecked: `PendingRequest.finish` resumes once and forgets the continuation, on the I/O thread.
            await withUnsafeContinuation { continuation in
                pending.continuation = continuation
                loop.submit(pending)
            }
        } onCancel: {
            loop.cancel(pending)
        }
        return try result.get()
    }

    /// The number of connections opened so far.
    public var connectionsOpened: Int { loop.connectionsOpened.load(ordering: .relaxed) }

    /// The highest number of streams that were open at once on a connection.
    public var maximumStreamsInFlight: Int { loop.maximumInFlight.load(ordering: .relaxed) }

    /// Closes the connection and fails every unfinished request with ``HTTPClientError/shutdown``; later
    /// requests fail the same way. Returns once the I/O thread has stopped.
    public func shutdown() {
        loop.shutdown()
    }
}
