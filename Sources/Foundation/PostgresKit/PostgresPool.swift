import Foundation
import Locking
import SQLSupport

/// A fixed set of PostgreSQL connections, each confined to a thread of its own: work handed to ``perform(_:)``
/// runs on one of those threads, so a statement waiting on the network never holds a thread of Swift's
/// cooperative pool. Connections are opened when first needed and opened again after one is lost (noticed before
/// the next call when it was lost while idle, see ``PostgresConnection/isStillConnected()``), so the pool recovers
/// by itself when the server comes back or another host becomes the primary; while it cannot connect, each call
/// fails at once with the connection error (no retry loop). A connection found lost (or read-only) ends its
/// siblings opened before it too: they most likely lead to the same lost server, whose machine may send no reset,
/// and each would otherwise fail one request after a TCP timeout of its own.
public final class PostgresPool: Sendable {
    private let queue = JobQueue<(Result<PostgresConnection, any Error>) -> Void>()
    /// How many times a connection of this pool was found lost; a connection opened before the latest loss is
    /// replaced before its next use.
    private let losses = LockedValue(0)
    /// The URL the pool connects to.
    public let url: String
    /// How many connections (and threads) the pool has.
    public let size: Int

    /// A pool of `size` connections to `url`; `name` labels its threads.
    public init(url: String, size: Int, name: String = "postgres") {
        self.url = url
        self.size = max(1, size)
        for index in 0..<self.size {
            Thread.start(named: "\(name)-\(index)") { [queue, losses] in
                Self.work(queue: queue, url: url, losses: losses)
            }
        }
    }

    deinit { queue.close() }

    /// Runs `body` with a connection on one of the pool's threads and returns its result. A connection that
    /// `body` leaves lost is replaced before the next call.
    public func perform<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            submit(body) { continuation.resume(with: $0) }
        }
    }

    /// ``perform(_:)`` without a task: `completion` runs on the pool's thread with the result, for a caller on a
    /// thread of its own that waits for it.
    public func submit<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) throws -> T,
        completion: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        let queued = queue.push { connection in
            completion(connection.flatMap { connection in Result { try body(connection) } })
        }
        if !queued {
            completion(.failure(PostgresError(sqlstate: nil, message: "the pool is closed", connectionLost: true)))
        }
    }

    /// Stops the threads once the work already queued is done.
    public func close() { queue.close() }

    private static func work(
        queue: JobQueue<(Result<PostgresConnection, any Error>) -> Void>, url: String, losses: LockedValue<Int>
    ) {
        var connection: PostgresConnection?
        var openedAfter = 0  // the losses counted when `connection` was opened
        while let job = queue.pop() {
            let lossesNow = losses.withLock { $0 }
            if connection?.isStillConnected() != true || openedAfter < lossesNow {
                connection = nil
                do throws(PostgresError) {
                    connection = try PostgresConnection(url: url)
                    openedAfter = lossesNow
                } catch {
                    job(.failure(error))
                    continue
                }
            }
            job(.success(connection!))
            if connection?.isHealthy != true {
                connection = nil
                losses.withLock { $0 += 1 }
            }
        }
    }
}
