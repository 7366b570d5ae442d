import Durations
import Foundation
import Locking
import OpenSSLCrypto
import SimulatorSupport

/// Where the gateway sends a connected device's messages: one open message stream.
public typealias FCMMessageSink = DeviceStreamSink

/// One installed device as the control API lists it.
public struct FCMDeviceSummary: Sendable, Equatable, Encodable {
    /// Its registration token.
    public var token: String
    /// The Android package name it registered for.
    public var app: String
    /// The Firebase project it registered with.
    public var project: String
    /// `false` while held offline.
    public var online: Bool
    /// Open message streams.
    public var streams: Int
    /// Messages delivered to it.
    public var delivered: Int
    /// Messages held for it (stored or throttled).
    public var stored: Int
}

/// A scripted answer for a device's next sends.
public struct FCMScriptedError: Sendable, Equatable, Codable {
    /// The HTTP status.
    public var status: Int
    /// FCM's code.
    public var errorCode: FCMErrorCode
    /// How many sends get it (`nil`: every one).
    public var count: Int?
    /// A `Retry-After` value in seconds.
    public var retryAfter: Int?

    /// Creates a scripted answer.
    public init(status: Int, errorCode: FCMErrorCode, count: Int? = nil, retryAfter: Int? = nil) {
        self.status = status
        self.errorCode = errorCode
        self.count = count
        self.retryAfter = retryAfter
    }
}

/// Whether a registration token is known.
public enum FCMDeviceStatus: Sendable, Equatable {
    /// Never issued.
    case unknown
    /// Installed.
    case active(app: String, project: String)
    /// Uninstalled.
    case uninstalled
}

/// The FCM HTTP v1 logic without networking: the token endpoint, `messages:send` validated as Google does,
/// the device registry, store-and-forward with Android's limits, quotas, faults and the capture log.
///
/// All state sits behind one lock; every method is safe from any thread. Time comes from the injected
/// ``WallClock``; delayed work advances in ``processDueWork()``, which the server calls periodically.
public final class FCMGateway: Sendable {
    /// The configuration the gateway was created with.
    public let configuration: FCMGatewayConfiguration
    /// The clock the gateway reads.
    public let clock: any WallClock
    private let state: LockedValue<FCMGatewayState>

    /// Creates a gateway.
    public init(configuration: FCMGatewayConfiguration, clock: any WallClock = SystemClock()) {
        self.configuration = configuration
        self.clock = clock
        state = LockedValue(FCMGatewayState(configuration: configuration, now: clock.now()))
    }

    // MARK: Provider API

    /// Answers one provider request: `POST /token` or `POST /v1/projects/{project}/messages:send`.
    public func handle(_ request: SimulatorProviderRequest) -> SimulatorProviderResponse {
        let now = clock.now()
        let path =
            request.path.utf8.firstIndex(of: UInt8(ascii: "?")).map { String(request.path[..<$0]) } ?? request.path
        if path == "/token" {
            guard request.method == "POST" else { return FCMGatewayState.methodNotAllowed() }
            return state.withLock { state in state.grant(request, now: now) }
        }
        if let named = Self.sendProject(path) {
            guard request.method == "POST" else { return FCMGatewayState.methodNotAllowed() }
            let project = named.utf8.contains(UInt8(ascii: "%")) ? named.removingPercentEncoding ?? named : named
            // The body is read before the lock is taken; its errors still come after authentication's.
            let message = Result { () throws(FCMAPIError) in try FCMSendRequestParser.parse(request.body) }
            return state.withLock { state in state.send(request, message: message, project: project, now: now) }
        }
        let error = FCMAPIError(code: 404, message: "The requested URL \(path.prefix(200)) was not found.")
        return SimulatorProviderResponse(status: 404, headers: FCMGatewayState.jsonHeaders, body: error.body)
    }

    /// The `{project}` of `/v1/projects/{project}/messages:send`, as written; `nil` for any other path.
    private static func sendProject(_ path: String) -> String? {
        let prefix = "/v1/projects/"
        let suffix = "/messages:send"
        guard path.utf8.count > prefix.utf8.count + suffix.utf8.count, path.hasPrefix(prefix), path.hasSuffix(suffix)
        else { return nil }
        let project = path.utf8.dropFirst(prefix.utf8.count).dropLast(suffix.utf8.count)
        guard !project.contains(UInt8(ascii: "/")) else { return nil }
        return String(Substring(project))
    }

    // MARK: Devices

    /// Installs an app instance of `app` for `project` and returns its registration token, or `nil` when no
    /// trusted service account belongs to `project`.
    public func registerDevice(app: String, project: String) -> String? {
        let now = clock.now()
        return state.withLock { state in state.register(app: app, project: project, now: now) }
    }

    /// Uninstalls the app instance: later sends get 404 `UNREGISTERED`, its streams close, what was held is
    /// dropped. `false` if the token is unknown or already uninstalled.
    @discardableResult
    public func unregisterDevice(_ token: String) -> Bool {
        let now = clock.now()
        guard let sinks = state.withLock({ state in state.uninstall(token, now: now) }) else { return false }
        for sink in sinks { sink.close() }
        return true
    }

    /// Whether `token` is installed, uninstalled or unknown.
    public func status(of token: String) -> FCMDeviceStatus {
        state.withLock { state in
            guard let device = state.devices[token] else { return .unknown }
            return device.uninstalled ? .uninstalled : .active(app: device.app, project: device.project)
        }
    }

    /// Attaches a message stream; what was held goes out. Returns the stream's id for
    /// ``disconnect(_:streamID:)``, or `nil` if the device is not installed.
    public func connect(_ token: String, sink: FCMMessageSink) -> UInt64? {
        let now = clock.now()
        return state.withLock { state in state.connect(token, sink: sink, now: now) }
    }

    /// Detaches a message stream (the client went away).
    public func disconnect(_ token: String, streamID: UInt64) {
        state.withLock { state in state.disconnect(token, streamID: streamID) }
    }

    /// Closes every message stream (for shutdown).
    public func closeAllStreams() {
        let sinks = state.withLock { state in state.devices.values.flatMap { $0.sinks.values } }
        for sink in sinks { sink.close() }
    }

    /// Holds a device offline (messages are stored, Android's limits apply) or brings it back (what was kept
    /// goes out). `false` if the device is not installed.
    @discardableResult
    public func setOnline(_ online: Bool, for token: String) -> Bool {
        let now = clock.now()
        return state.withLock { state in state.setOnline(online, token, now: now) }
    }

    /// Answers the device's next sends with `error`. `false` if the device is not installed.
    @discardableResult
    public func scriptError(_ error: FCMScriptedError, for token: String) -> Bool {
        state.withLock { state in
            guard var device = state.devices[token], !device.uninstalled else { return false }
            device.scripted = error
            state.devices[token] = device
            return true
        }
    }

    /// Removes a scripted answer. `false` if the device is not installed.
    @discardableResult
    public func clearScriptedError(for token: String) -> Bool {
        state.withLock { state in
            guard var device = state.devices[token], !device.uninstalled else { return false }
            device.scripted = nil
            state.devices[token] = device
            return true
        }
    }

    /// Every installed device, in registration order.
    public func devices() -> [FCMDeviceSummary] {
        state.withLock { state in
            state.devices.values.filter { !$0.uninstalled }.sorted { $0.number < $1.number }.map {
                FCMDeviceSummary(
                    token: $0.token, app: $0.app, project: $0.project, online: $0.online, streams: $0.sinks.count,
                    delivered: $0.delivered, stored: $0.queue.count)
            }
        }
    }

    // MARK: Control

    /// The faults in force.
    public var faults: SimulatorFaults { state.faults }

    /// Replaces the faults in force (a new seed restarts the sequence).
    public func setFaults(_ faults: SimulatorFaults) { state.setFaults(faults) }

    /// Forgets the capture log; numbering goes on.
    public func clearLog() { state.clearLog() }

    /// Capture-log entries after sequence `after`, oldest first, at most `limit`.
    public func logEntries(after: Int = 0, limit: Int = .max) -> [FCMLogEntry] {
        state.logEntries(after: after, limit: limit)
    }

    /// A snapshot of the counters.
    public var metrics: FCMMetrics { state.withLock { $0.metricsSnapshot } }

    /// Releases throttled messages the throttle now allows and expires held ones.
    public func processDueWork() {
        let now = clock.now()
        state.withLock { state in state.processDueWork(now: now) }
    }

}

extension FCMGateway: SimulatorGateway {
    /// The counters as Prometheus text.
    package var prometheusText: String { metrics.prometheusText }
}
