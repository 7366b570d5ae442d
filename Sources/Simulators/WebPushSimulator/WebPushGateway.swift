import Durations
import Foundation
import Locking
import OpenSSLCrypto
import SimulatorSupport

/// The Web Push service logic without networking: push resources validated as a real push service does them
/// (RFC 8030 headers, RFC 8292 VAPID, RFC 8291 bodies), subscriptions of the simulated browser (which decrypts)
/// and of Mozilla-protocol browsers (which get the ciphertext), store-and-forward, faults and the capture log.
///
/// All state sits behind one lock; every method is safe from any thread. Time comes from the injected
/// ``WallClock``; expirations advance in ``processDueWork()``, which the server calls periodically.
public final class WebPushGateway: Sendable {
    /// The configuration the gateway was created with.
    public let configuration: WebPushGatewayConfiguration
    /// The clock the gateway reads.
    public let clock: any WallClock
    private let state: LockedValue<WebPushGatewayState>

    /// Creates a gateway.
    public init(configuration: WebPushGatewayConfiguration, clock: any WallClock = SystemClock()) {
        self.configuration = configuration
        self.clock = clock
        state = LockedValue(WebPushGatewayState(configuration: configuration))
    }

    /// What push endpoints start with now.
    public var endpointBase: String { state.withLock { $0.endpointBase } }

    /// Replaces what new and existing endpoints start with (the server does once it knows its bound port).
    public func setEndpointBase(_ base: String) {
        state.withLock { $0.endpointBase = base.hasSuffix("/") ? String(base.dropLast()) : base }
    }

    // MARK: Push resources

    /// Answers one request to a push resource (`POST <endpoint>`).
    public func handle(_ request: SimulatorProviderRequest) -> SimulatorProviderResponse {
        let now = clock.now()
        let path = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.path
        return state.withLock { state in
            var id: String?
            let prefix = state.resourcePrefix
            if path.hasPrefix(prefix) {
                let rest = path.dropFirst(prefix.count)
                if !rest.isEmpty, !rest.contains("/") { id = String(rest) }
            }
            // Every request is answered and logged as a push; one to no push resource is a 404.
            return state.push(request, subscriptionID: id, now: now)
        }
    }

    // MARK: Subscriptions of the simulated browser

    /// Subscribes as a browser would for `applicationServerKey` (a 65-byte P-256 point): a fresh key pair and
    /// auth secret, the private key kept to decrypt.
    public func subscribe(applicationServerKey: [UInt8]) throws -> WebPushCreatedSubscription {
        _ = try P256PublicKey(rawRepresentation: applicationServerKey)
        let privateKey = try P256PrivateKey()
        let keys = SimulatedBrowserKeys(
            privateKey: privateKey, publicKey: try privateKey.publicKey.rawRepresentation,
            authSecret: SecureRandom.bytes(16))
        return state.withLock { state in
            let id = state.add(holder: .simulated(keys), applicationServerKey: applicationServerKey)
            return WebPushCreatedSubscription(
                id: id, endpoint: state.endpoint(of: id), p256dh: Base64URL.encode(keys.publicKey),
                auth: Base64URL.encode(keys.authSecret))
        }
    }

    /// Subscribes for `applicationServerKey` with keys a device holds: `p256dh` (a 65-byte P-256 point) and the
    /// 16-byte `auth` secret. The sim cannot decrypt what is pushed to it; the device's message stream carries the
    /// ciphertext (`body`).
    public func subscribe(
        applicationServerKey: [UInt8], deviceKeys p256dh: [UInt8], auth: [UInt8]
    ) throws -> WebPushCreatedSubscription {
        _ = try P256PublicKey(rawRepresentation: applicationServerKey)
        _ = try P256PublicKey(rawRepresentation: p256dh)
        guard auth.count == 16 else { throw CryptoError("subscribing", reason: "the auth secret is not 16 bytes") }
        return state.withLock { state in
            let id = state.add(holder: .device(p256dh: p256dh, auth: auth), applicationServerKey: applicationServerKey)
            return WebPushCreatedSubscription(
                id: id, endpoint: state.endpoint(of: id), p256dh: Base64URL.encode(p256dh), auth: Base64URL.encode(auth)
            )
        }
    }

    /// Deletes a subscription (the browser unsubscribed): later pushes get 410, its streams close, what it kept
    /// is dropped. `false` if it is unknown or already deleted.
    @discardableResult
    public func unsubscribe(_ id: String) -> Bool {
        let now = clock.now()
        guard let sinks = state.withLock({ $0.delete(id, now: now) }) else { return false }
        for sink in sinks { sink.close() }
        return true
    }

    /// Whether `id` is live, deleted or unknown.
    public func status(of id: String) -> WebPushSubscriptionStatus {
        state.withLock { state in
            guard let record = state.subscriptions[id] else { return .unknown }
            return record.deleted ? .deleted : .active
        }
    }

    /// Attaches a message stream to a subscription of the device API (the simulated browser's, or a device's that
    /// holds its keys); what it kept goes out. Returns the stream's id for ``disconnect(_:streamID:)``, or `nil` if
    /// it is not such a live subscription.
    public func connect(_ id: String, sink: WebPushMessageSink) -> UInt64? {
        let now = clock.now()
        return state.withLock { state in
            guard var record = state.subscriptions[id], !record.deleted else { return nil }
            if case .mozilla = record.holder { return nil }
            let streamID = state.nextStreamID
            state.nextStreamID += 1
            record.sinks[streamID] = sink
            state.subscriptions[id] = record
            state.drainIfReachable(id, now: now)
            return streamID
        }
    }

    /// Detaches a message stream (the client went away).
    public func disconnect(_ id: String, streamID: UInt64) {
        state.withLock { state in _ = state.subscriptions[id]?.sinks.removeValue(forKey: streamID) }
    }

    /// Closes every message stream (for shutdown).
    public func closeAllStreams() {
        let sinks = state.withLock { state in state.subscriptions.values.flatMap { $0.sinks.values } }
        for sink in sinks { sink.close() }
    }

    /// Holds a subscription offline (messages are kept until their TTL) or brings it back (what was kept goes
    /// out). `false` if it is not live.
    @discardableResult
    public func setOnline(_ online: Bool, for id: String) -> Bool {
        let now = clock.now()
        return state.withLock { state in
            guard let record = state.subscriptions[id], !record.deleted else { return false }
            state.subscriptions[id]?.online = online
            state.drainIfReachable(id, now: now)
            return true
        }
    }

    /// Answers the subscription's next pushes with `error`. `false` if it is not live.
    @discardableResult
    public func scriptError(_ error: WebPushScriptedError, for id: String) -> Bool {
        state.withLock { state in
            guard let record = state.subscriptions[id], !record.deleted else { return false }
            state.subscriptions[id]?.scripted = error
            return true
        }
    }

    /// Removes a scripted answer. `false` if the subscription is not live.
    @discardableResult
    public func clearScriptedError(for id: String) -> Bool {
        state.withLock { state in
            guard let record = state.subscriptions[id], !record.deleted else { return false }
            state.subscriptions[id]?.scripted = nil
            return true
        }
    }

    /// Every live subscription, in the order made.
    public func subscriptions() -> [WebPushSubscriptionSummary] {
        state.withLock { state in
            state.subscriptions.values.filter { !$0.deleted }.sorted { $0.number < $1.number }.map(state.summary)
        }
    }

    // MARK: Mozilla's WebSocket push protocol

    /// Where Mozilla-protocol frames go (the server's WebSocket listener).
    public func setMozillaTransport(_ transport: MozillaTransport?) {
        state.withLock { $0.transport = transport }
    }

    /// A Mozilla-protocol client connected.
    public func mozillaOpened(_ connection: UInt64) {
        state.withLock { $0.mozillaOpened(connection) }
    }

    /// A whole text frame from a Mozilla-protocol client; the answers go out through the transport.
    public func mozillaReceived(_ connection: UInt64, _ text: String) {
        let now = clock.now()
        state.withLock { $0.mozillaReceived(connection, text, now: now) }
    }

    /// A Mozilla-protocol client went away; what it did not acknowledge waits for its next hello.
    public func mozillaClosed(_ connection: UInt64) {
        state.withLock { $0.mozillaClosed(connection) }
    }

    // MARK: Control

    /// The faults in force.
    public var faults: SimulatorFaults { state.faults }

    /// Replaces the faults in force (a new seed restarts the sequence).
    public func setFaults(_ faults: SimulatorFaults) { state.setFaults(faults) }

    /// Forgets the capture log; numbering goes on.
    public func clearLog() { state.clearLog() }

    /// Capture-log entries after sequence `after`, oldest first, at most `limit`.
    public func logEntries(after: Int = 0, limit: Int = .max) -> [WebPushLogEntry] {
        state.logEntries(after: after, limit: limit)
    }

    /// A snapshot of the counters.
    public var metrics: WebPushMetrics { state.withLock { $0.metricsSnapshot } }

    /// Expires kept messages whose TTL has passed.
    public func processDueWork() {
        let now = clock.now()
        state.withLock { $0.processDueWork(now: now) }
    }

}

extension WebPushGateway: SimulatorGateway {
    /// The counters as Prometheus text.
    package var prometheusText: String { metrics.prometheusText }
}
