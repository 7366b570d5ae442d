import Durations
import Foundation
import Locking
import OpenSSLCrypto
import SimulatorSupport

/// The APNs gateway logic without any networking: validates provider requests as APNs does, keeps the
/// device registry, delivers to connected devices, stores for offline ones, throttles background
/// pushes, injects faults and records everything in the capture log.
///
/// All state sits behind one mutex; every method is safe to call from any thread. Time comes from the
/// injected ``WallClock``; delayed work (throttled background pushes, expirations) advances when
/// ``processDueWork()`` is called, which the server does periodically and tests do after moving time.
public final class APNsGateway: SimulatorControl {
    /// The configuration the gateway was created with.
    public let configuration: APNsGatewayConfiguration
    /// The clock the gateway reads.
    public let clock: any WallClock
    let state: LockedValue<APNsGatewayState>

    /// Creates a gateway.
    public init(configuration: APNsGatewayConfiguration, clock: any WallClock = SystemClock()) {
        self.configuration = configuration
        self.clock = clock
        state = LockedValue(APNsGatewayState(configuration: configuration))
    }

    // MARK: Provider API

    /// Answers one provider request (`POST /3/device/{token}`), delivering or storing its notification.
    public func handle(_ request: APNsProviderRequest) -> APNsProviderResponse {
        let now = clock.now()
        let nowMilliseconds = millisecondsSince1970(now)
        let headers = PushRequestParser.KnownHeaders(request.headers)
        let given = headers.apnsID.flatMap { PushRequestParser.isUUID($0) ? $0 : nil }
        return state.withLock { state in
            let apnsID = given ?? state.randomUUID()
            let goAway = state.faults.countStream(on: request.connectionKey)
            var tokenText: String?
            var response: APNsProviderResponse
            var outcome = APNsOutcome.refused
            var detail: String?
            var accepted: (ParsedPush, SimulatorFaults.Draw, APNsGatewayState.DeviceIndex)?
            var scripted = false
            do throws(RejectionReason) {
                tokenText = try PushRequestParser.checkTarget(request)
                try PushRequestParser.checkHeaders(headers)
                defer { state.metrics.tokenVerifications = state.verifier.signatureVerificationCount }
                if let reason = state.verifier.authorize(headers.authorization, now: now) { throw reason }
                let push = try PushRequestParser.parse(request, headers: headers, tokenText: tokenText ?? "")
                let device = try state.checkDevice(for: push, environment: request.environment, scripted: &scripted)
                let decision = state.faults.nextDecision()
                switch decision {
                case .status503: throw .serviceUnavailable
                case .status429: throw .tooManyRequests
                case .none, .drop: break
                }
                accepted = (push, decision, device)
                response = APNsProviderResponse(
                    status: 200, apnsID: apnsID, uniqueID: request.environment == .sandbox ? state.randomUUID() : nil)
            } catch {
                if error == .serviceUnavailable || error == .tooManyRequests { detail = "fault" }
                if scripted { detail = "scripted" }
                var timestamp: Int64?
                if error == .unregistered, let token = tokenText?.lowercased(), let device = state.devices[token] {
                    // A scripted 410 for a live device: "stopped being valid" now, after its registration.
                    timestamp = device.unregisteredAt ?? max(nowMilliseconds, device.registeredAt + 1)
                }
                response = APNsProviderResponse(
                    status: error.status, apnsID: apnsID, reason: error, timestamp: timestamp)
            }
            response.goAway = goAway
            response.delay = state.faults.configuration.common.latency
            state.countResponse(status: response.status, reason: response.reason)

            if let (push, decision, _) = accepted {
                outcome = decision == .drop ? .dropped : .delivered
                if decision == .drop { detail = "fault" }
                tokenText = push.deviceToken
            }
            // A notification that goes on to be routed gets its first event from the routing.
            let routed = accepted != nil && accepted?.1 != .drop
            let entry = makeEntry(
                request, apnsID: apnsID, token: tokenText, response: response, outcome: outcome,
                event: routed ? nil : APNsLogEvent(outcome: outcome, timestamp: nowMilliseconds, detail: detail),
                at: nowMilliseconds)
            let sequence = state.log.append(entry)
            if let (push, decision, device) = accepted {
                if decision == .drop {
                    state.metrics.dropped += 1
                } else {
                    let notification = PendingNotification(push, apnsID: apnsID, logSequence: sequence)
                    state.route(notification, device: device, now: now)
                }
            }
            return response
        }
    }

    private func makeEntry(
        _ request: APNsProviderRequest, apnsID: String, token: String?, response: APNsProviderResponse,
        outcome: APNsOutcome, event: APNsLogEvent?, at timestamp: Int64
    ) -> CapturedRequest {
        let limit = configuration.logPayloadLimit
        let truncated = request.body.count > limit
        return request.body.withUnsafeBytes { body in
            CapturedRequest(
                timestamp: timestamp, apnsId: apnsID, method: request.method, path: request.path, deviceToken: token,
                headers: request.headers, payload: truncated ? UnsafeRawBufferPointer(rebasing: body[..<limit]) : body,
                payloadTruncated: truncated, status: response.status, reason: response.reason, outcome: outcome,
                event: event, environment: request.environment)
        }
    }

    // MARK: Devices

    /// Registers a new device for `topic` in `environment` and returns its token (64 lowercase hex characters).
    public func registerDevice(topic: String, environment: APNsEnvironment = .sandbox) -> String {
        let now = millisecondsSince1970(clock.now())
        return state.withLock { state in
            var token = SecureRandom.hex(32)
            while state.devices[token] != nil { token = SecureRandom.hex(32) }
            state.devices[token] = DeviceRecord(
                token: token, topic: topic, environment: environment, registeredAt: now, number: state.nextDeviceNumber)
            state.nextDeviceNumber += 1
            state.metrics.registeredDevices += 1
            return token
        }
    }

    /// Deletes a device: later pushes to it get 410 `Unregistered`; its streams are closed and anything
    /// held for it is dropped. Returns `false` if the token is unknown or already deleted.
    @discardableResult
    public func unregisterDevice(_ token: String) -> Bool {
        let now = millisecondsSince1970(clock.now())
        let sinks = state.withLock { state -> [APNsDeviceSink]? in
            state.unregister(token.lowercased(), at: now)
        }
        guard let sinks else { return false }
        for sink in sinks { sink.close() }
        return true
    }

    /// Whether `token` is registered, deleted or unknown.
    public func status(of token: String) -> APNsDeviceStatus {
        state.withLock { state in
            guard let device = state.devices[token.lowercased()] else { return .unknown }
            if let timestamp = device.unregisteredAt { return .unregistered(timestamp: timestamp) }
            return .active(topic: device.topic, environment: device.environment)
        }
    }

    /// Attaches a notification stream to a device and sends it what was stored while it was away.
    /// Returns the stream's identifier for ``disconnect(_:streamID:)``, or `nil` if the device is not active.
    public func connect(_ token: String, sink: APNsDeviceSink) -> UInt64? {
        let now = clock.now()
        return state.withLock { state in state.connect(token.lowercased(), sink: sink, now: now) }
    }

    /// Detaches a notification stream (the client went away).
    public func disconnect(_ token: String, streamID: UInt64) {
        state.withLock { state in state.disconnect(token.lowercased(), streamID: streamID) }
    }

    /// Closes every notification stream (for shutdown).
    public func closeAllStreams() {
        let sinks = state.withLock { state in state.devices.values.flatMap { $0.sinks.values } }
        for sink in sinks { sink.close() }
    }

    // MARK: Control (for tests that script the gateway)

    /// The faults in force.
    public var faults: APNsFaults { state.withLock { $0.faults.configuration } }

    /// Replaces the faults in force, from the next provider request on (a new seed restarts the sequence).
    public func setFaults(_ faults: APNsFaults) {
        state.withLock { $0.faults = APNsFaultInjector(configuration: faults) }
    }

    /// Answers the device's next `count` valid sends (every one when `nil`) with `reason` and its status, in
    /// place of delivering them. Returns `false` if the device is not active.
    @discardableResult
    public func scriptError(_ reason: RejectionReason, count: Int? = nil, for token: String) -> Bool {
        state.withLock { state in
            state.updateActive(token.lowercased()) {
                $0.scriptedError = ScriptedError(reason: reason, remaining: count)
            }
        }
    }

    /// Removes a scripted answer. Returns `false` if the device is not active.
    @discardableResult
    public func clearScriptedError(for token: String) -> Bool {
        state.withLock { state in state.updateActive(token.lowercased()) { $0.scriptedError = nil } }
    }

    /// Holds a device offline (its notifications are stored and collapsed, the last one kept) or brings it
    /// back online (a connected device then gets what was stored). Returns `false` if the device is not active.
    @discardableResult
    public func setOnline(_ online: Bool, for token: String) -> Bool {
        let now = clock.now()
        return state.withLock { state in state.setOnline(token.lowercased(), online, now: now) }
    }

    /// Every active device, ordered by registration.
    public func devices() -> [APNsDeviceSummary] {
        state.withLock { state in
            state.devices.values.filter { $0.unregisteredAt == nil }
                .sorted { $0.number < $1.number }
                .map { device in
                    APNsDeviceSummary(
                        token: device.token, topic: device.topic, environment: device.environment,
                        online: device.online, streams: device.sinks.count, delivered: device.delivered,
                        stored: device.stored == nil ? 0 : 1, throttled: device.deferred == nil ? 0 : 1,
                        scriptedError: device.scriptedError.map(\.reason))
                }
        }
    }

    /// Forgets the capture log; later entries go on numbering where it stopped.
    public func clearLog() {
        state.withLock { $0.log.clear() }
    }

    // MARK: Time-driven work

    /// Releases throttled background notifications the budget now allows and expires stored ones.
    public func processDueWork() {
        let now = clock.now()
        state.withLock { state in state.processDueWork(now: now) }
    }

    // MARK: Observation

    /// Capture-log entries after sequence number `after`, oldest first, at most `limit`.
    public func logEntries(after: Int = 0, limit: Int = .max) -> [APNsLogEntry] {
        state.withLock { $0.log.entries(after: after, limit: limit) }.map(\.entry)
    }

    /// A snapshot of the counters.
    public var metrics: APNsMetrics { state.withLock { $0.metricsSnapshot } }

    /// The form of its faults in `/sim/faults`: the shared fields and `goawayAfter`.
    package typealias FaultsForm = APNsFaultsJSON

    /// The counters as Prometheus text (`GET /metrics`).
    package var prometheusText: String { metrics.prometheusText }

}
