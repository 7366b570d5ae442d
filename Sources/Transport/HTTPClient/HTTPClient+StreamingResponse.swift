import Foundation
import ServerSentEvents

extension HTTPClient {
    /// A response whose body is still arriving, returned by ``HTTPClient/stream(_:)``.
    public struct StreamingResponse: Sendable {
        /// The status code, e.g. `200`.
        public let status: Int
        /// The response header fields, in the order received; look them up case-insensitively.
        public let headers: HTTPHeaders
        /// The HTTP version the response came with.
        public let version: HTTPVersion
        /// The body, as chunks of bytes in arrival order. Iterate it once.
        public let body: HTTPBodyStream

        /// Aborts the transfer; an iteration of ``body`` still running ends with `CancellationError`.
        public func cancel() {
            body.cancel()
        }
    }
}

/// The body of an ``HTTPClient/StreamingResponse``: chunks of bytes as the server sends them.
///
/// The sequence ends when the response is complete and throws an ``HTTPClientError`` when the transfer
/// fails. Chunks are buffered without limit until read. Cancelling the iterating task, calling
/// ``cancel()`` or releasing every copy of the stream and its iterator aborts the transfer.
public struct HTTPBodyStream: AsyncSequence, Sendable {
    /// A chunk of the body.
    public typealias Element = Data

    let base: AsyncThrowingStream<Data, any Error>
    let handle: TransferHandle

    /// Returns the iterator; only one iterator may be used, by one task at a time.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), handle: handle)
    }

    /// Aborts the transfer.
    public func cancel() {
        handle.cancel()
    }

    /// Reads the rest of the body into one `Data` value.
    public func collect() async throws -> Data {
        var data = Data()
        for try await chunk in self { data.append(chunk) }
        return data
    }

    /// The body parsed as a `text/event-stream`: one ``ServerSentEvent`` per dispatched event.
    public var serverSentEvents: ServerSentEventSequence {
        ServerSentEventSequence(body: self)
    }

    /// Iterates over the chunks of an ``HTTPBodyStream``.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<Data, any Error>.AsyncIterator
        let handle: TransferHandle

        /// The next chunk, or `nil` once the response is complete; throws `CancellationError` when the
        /// iterating task is cancelled (which also aborts the transfer).
        public mutating func next() async throws -> Data? {
            guard let chunk = try await base.next() else {
                try Task.checkCancellation()
                return nil
            }
            return chunk
        }
    }
}

/// The events of a Server-Sent Events response body, parsed with ``ServerSentEventParser``.
public struct ServerSentEventSequence: AsyncSequence, Sendable {
    /// One event.
    public typealias Element = ServerSentEvent

    let body: HTTPBodyStream

    /// Returns the iterator; only one iterator may be used, by one task at a time.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(chunks: body.makeAsyncIterator())
    }

    /// Iterates over the events of a Server-Sent Events stream.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var chunks: HTTPBodyStream.AsyncIterator
        var parser = ServerSentEventParser()
        var pending: [ServerSentEvent] = []

        /// The next event, or `nil` once the stream has ended (an incomplete last event is dropped).
        public mutating func next() async throws -> ServerSentEvent? {
            while pending.isEmpty {
                guard let chunk = try await chunks.next() else { return nil }
                pending = parser.feed(chunk)
            }
            return pending.removeFirst()
        }
    }
}

/// Aborts a streamed transfer when asked to, or when the last copy of its body stream is released.
final class TransferHandle: Sendable {
    private let loop: CurlEventLoop
    private let transfer: Transfer

    init(loop: CurlEventLoop, transfer: Transfer) {
        self.loop = loop
        self.transfer = transfer
    }

    func cancel() {
        loop.cancel(transfer)
    }

    deinit {
        loop.cancel(transfer)
    }
}
