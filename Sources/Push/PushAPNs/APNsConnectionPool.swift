import APNs
import Locking
import Push

/// The APNs connections of an ``APNsPushService``: one ``APNsClient`` per (environment, signing key), opened on
/// first use and closed once it has had nothing in flight for `idleTimeout`.
///
/// The sweeper task holds the pool (not the sender) and ends at ``shutdown()``.
final class APNsConnectionPool: Sendable {
    /// Where one connection goes.
    struct Key: Hashable, Sendable {
        var environment: PushEnvironment
        /// Index of the signing key.
        var key: Int
    }

    private struct Connection {
        var client: APNsClient
        var inFlight = 0
        var lastUsed: ContinuousClock.Instant
    }

    private struct State {
        var connections: [Key: Connection] = [:]
        var opened = 0
        var closed = false
        var sweeper: Task<Void, Never>?
    }

    let idleTimeout: Duration
    private let open: @Sendable (Key) -> APNsClient
    private let state = LockedValue(State())

    /// `open` makes the client for a key (it connects on its first send).
    init(idleTimeout: Duration, open: @escaping @Sendable (Key) -> APNsClient) {
        self.idleTimeout = idleTimeout
        self.open = open
    }

    /// The connection for `key`, opened if there is none, counted in flight until ``checkIn(_:)``; `nil` after
    /// ``shutdown()``.
    func checkOut(_ key: Key) -> APNsClient? {
        let (client, first) = state.withLock { state -> (APNsClient?, Bool) in
            guard !state.closed else { return (nil, false) }
            let now = ContinuousClock.now
            if var connection = state.connections[key] {
                connection.inFlight += 1
                connection.lastUsed = now
                state.connections[key] = connection
                return (connection.client, false)
            }
            let client = open(key)
            state.connections[key] = Connection(client: client, inFlight: 1, lastUsed: now)
            state.opened += 1
            return (client, state.opened == 1)
        }
        if first { startSweeping() }
        return client
    }

    /// Ends a send that ``checkOut(_:)`` started.
    func checkIn(_ key: Key) {
        state.withLock { state in
            state.connections[key]?.inFlight -= 1
            state.connections[key]?.lastUsed = .now
        }
    }

    private func startSweeping() {
        let interval = max(min(idleTimeout / 2, .seconds(30)), .milliseconds(10))
        let task = Task { [self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                closeIdleConnections()
            }
        }
        let closed = state.withLock { state -> Bool in
            if !state.closed { state.sweeper = task }
            return state.closed
        }
        if closed { task.cancel() }  // shut down meanwhile
    }

    /// Closes every connection that has had nothing in flight for ``idleTimeout``; returns how many.
    @discardableResult
    func closeIdleConnections(now: ContinuousClock.Instant = .now) -> Int {
        let idle = state.withLock { state -> [APNsClient] in
            let keys = state.connections.filter { $0.value.inFlight == 0 && now - $0.value.lastUsed >= idleTimeout }
            return keys.map { state.connections.removeValue(forKey: $0.key)!.client }
        }
        for client in idle { client.shutdown() }
        return idle.count
    }

    /// The connections open now.
    var openConnections: Int { state.withLock { $0.connections.count } }

    /// The connections opened so far.
    var connectionsOpened: Int { state.withLock { $0.opened } }

    /// Closes every connection and stops the sweeper; later check-outs get `nil`.
    func shutdown() {
        let (clients, sweeper) = state.withLock { state -> ([APNsClient], Task<Void, Never>?) in
            state.closed = true
            defer {
                state.connections = [:]
                state.sweeper = nil
            }
            return (state.connections.values.map(\.client), state.sweeper)
        }
        sweeper?.cancel()
        for client in clients { client.shutdown() }
    }
}
