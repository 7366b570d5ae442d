import Foundation

/// An async HTTP/1.1 and HTTP/2 client built on libcurl's multi interface.
///
/// Each client runs one I/O thread and keeps a pool of connections: with HTTP/2, concurrent requests to
/// one origin are multiplexed over a single connection. Requests may be sent from any task; cancelling
/// the task aborts the transfer and throws `CancellationError`.
///
/// ```swift
/// let client = HTTPClient(configuration: .init(tls: .init(caFile: "ca.pem")))
/// let response = try await client.execute(HTTPClient.Request(url: "https://127.0.0.1:8443/healthz"))
/// ```
public final class HTTPClient: Sendable {
    /// The configuration the client was created with.
    public let configuration: Configuration
    private let loop: CurlEventLoop

    /// Creates a client and starts its I/O thread.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        loop = CurlEventLoop(configuration: configuration)
        loop.start()
    }

    deinit {
        loop.shutdown()
    }

    /// Sends `request` and returns the complete response once its whole body has arrived.
    ///
    /// Any status code is a response, not an error; errors are ``HTTPClientError`` values, or
    /// `CancellationError` when the calling task is cancelled.
    public func execute(_ request: HTTPClient.Request) async throws -> HTTPClient.Response {
        let transfer = try Transfer(request: request, configuration: configuration, streaming: false)
        let loop = self.loop
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                transfer.delivery = .buffered(continuation)
                loop.submit(transfer)
            }
        } onCancel: {
            loop.cancel(transfer)
        }
    }

    /// Sends `request` and returns as soon as the response head has arrived; the body is delivered in chunks
    /// through ``HTTPClient/StreamingResponse/body`` as it arrives.
    ///
    /// Meant for long-lived responses such as Server-Sent Events: ``HTTPClient/Request/timeout`` applies only when
    /// set. Cancelling the task that iterates the body, calling ``HTTPClient/StreamingResponse/cancel()`` or
    /// releasing the response and its body aborts the transfer.
    public func stream(_ request: HTTPClient.Request) async throws -> HTTPClient.StreamingResponse {
        let transfer = try Transfer(request: request, configuration: configuration, streaming: true)
        let loop = self.loop
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                transfer.delivery = .streaming(continuation, loop)
                loop.submit(transfer)
            }
        } onCancel: {
            loop.cancel(transfer)
        }
    }

    /// The number of connections the client has opened so far (counted when each transfer ends).
    ///
    /// With HTTP/2 and the default limits, any number of concurrent requests to one origin open one connection.
    public var connectionsOpened: Int {
        loop.connectionsOpened.load(ordering: .relaxed)
    }

    /// Stops the I/O thread and closes every connection; requests still running fail with
    /// ``HTTPClientError/shutdown``, and so does every later request. Safe to call more than once.
    public func shutdown() {
        loop.shutdown()
    }
}
