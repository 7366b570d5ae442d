import Foundation
import JSONText
import OpenSSLCrypto
import SimulatorSupport

/// A notification accepted for a device and not yet delivered.
struct PendingNotification: Sendable {
    var apnsID: String
    var pushType: PushType
    var expiration: Int64?
    var logSequence: Int
    /// The `data:` of the event the device receives.
    var eventData: String

    init(_ push: ParsedPush, apnsID: String, logSequence: Int) {
        self.apnsID = apnsID
        pushType = push.pushType
        expiration = push.expiration
        self.logSequence = logSequence
        // The apns-id is a UUID (checked, or made here): it never needs escaping.
        let collapse = push.collapseID.map(JSONText.quoted) ?? "null"
        let priority = String(push.priority)
        let pieces = (
            apnsID, push.pushType.rawValue, priority, collapse, push.payloadJSON
        )
        let capacity =
            80 + pieces.0.utf8.count + pieces.1.utf8.count + pieces.2.utf8.count + pieces.3.utf8.count
            + pieces.4.utf8.count
        eventData = String(unsafeUninitializedCapacity: capacity) { buffer in
            var index = 0
            func put(_ text: String) {
                var text = text
                text.withUTF8 { bytes in
                    _ = UnsafeMutableBufferPointer(rebasing: buffer[index...]).initialize(fromContentsOf: bytes)
                    index += bytes.count
                }
            }
            func put(_ text: StaticString) {
                let bytes = UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
                _ = UnsafeMutableBufferPointer(rebasing: buffer[index...]).initialize(fromContentsOf: bytes)
                index += bytes.count
            }
            put(#"{"apnsId":""#)
            put(pieces.0)
            put(#"","pushType":""#)
            put(pieces.1)
            put(#"","priority":"#)
            put(pieces.2)
            put(#","collapseId":"#)
            put(pieces.3)
            put(#","payload":"#)
            put(pieces.4)
            put("}")
            return index
        }
    }

    /// Whether the expiration (seconds since 1970) lies before `now`.
    func isExpired(now: Date) -> Bool {
        guard let expiration else { return false }
        return Double(expiration) < now.timeIntervalSince1970.rounded(.down)
    }
}

/// An answer a test scripted for a device's next sends (`PUT /sim/devices/{token}/error`).
struct ScriptedError: Sendable, Equatable {
    var reason: RejectionReason
    /// Sends still to be answered this way; `nil` for every send until the script is cleared.
    var remaining: Int?
}

/// One registered device.
struct DeviceRecord: Sendable {
    let token: String
    let topic: String
    let environment: APNsEnvironment
    let registeredAt: Int64
    /// Its place in the order of registrations.
    let number: Int
    var unregisteredAt: Int64?
    var sinks: [UInt64: APNsDeviceSink] = [:]
    /// `false` while a test holds the device offline: its notifications are stored and collapsed even though
    /// its streams stay open, and the last one is delivered when it comes back online.
    var online = true
    /// Notifications delivered to it.
    var delivered = 0
    /// The answer scripted for its next sends, if any.
    var scriptedError: ScriptedError?
    /// The one notification kept while the device is offline.
    var stored: PendingNotification?
    /// The one background notification held back by the budget.
    var deferred: PendingNotification?
    /// When background notifications were delivered, within the budget window.
    var backgroundDeliveries: [Date] = []

    init(token: String, topic: String, environment: APNsEnvironment, registeredAt: Int64, number: Int) {
        self.number = number
        self.token = token
        self.topic = topic
        self.environment = environment
        self.registeredAt = registeredAt
    }
}

/// Everything an ``APNsGateway`` keeps, mutated only under its mutex.
struct APNsGatewayState: Sendable {
    let configuration: APNsGatewayConfiguration
    var verifier: ProviderTokenVerifier
    var faults: APNsFaultInjector
    var devices: [String: DeviceRecord] = [:]
    var log: CaptureLog<CapturedRequest>
    var metrics = APNsMetrics()
    /// Devices holding something that time may change (a throttled push, a stored push that expires).
    var pendingWork: Set<String> = []
    var nextStreamID: UInt64 = 1
    var nextDeviceNumber = 1
    /// Answers with status 200, not yet added to `metrics.responses` (counted apart, without hashing a key).
    var successResponses = 0
    /// Random bytes from OpenSSL's DRBG, drawn in blocks and used from `randomOffset` on.
    private var randomBytes: [UInt8] = []
    private var randomOffset = 0

    init(configuration: APNsGatewayConfiguration) {
        self.configuration = configuration
        verifier = ProviderTokenVerifier(
            keys: configuration.providerKeys, tokenLifetime: configuration.providerTokenLifetime,
            updateInterval: configuration.providerTokenUpdateInterval)
        faults = APNsFaultInjector(configuration: configuration.faults)
        log = CaptureLog(capacity: configuration.logCapacity)
    }

    /// Where a device sits in `devices`; valid until the table changes.
    typealias DeviceIndex = [String: DeviceRecord].Index

    /// The stateful rules: allowed topic, a token registered in the listener's environment (`nil`: either),
    /// an active device, the device's topic, then any answer a test scripted for the device (which throws
    /// `scripted`). Returns where the device is, for ``route(_:device:now:)``.
    mutating func checkDevice(
        for push: ParsedPush, environment: APNsEnvironment?, scripted: inout Bool
    ) throws(RejectionReason) -> DeviceIndex {
        if !configuration.allowedTopics.isEmpty, !configuration.allowedTopics.contains(push.baseTopic) {
            throw .topicDisallowed
        }
        guard let index = devices.index(forKey: push.deviceToken) else { throw .badDeviceToken }
        // Read in place (an inout access), without copying the record.
        try Self.check(&devices.values[index], for: push, environment: environment, scripted: &scripted)
        return index
    }

    private static func check(
        _ device: inout DeviceRecord, for push: ParsedPush, environment: APNsEnvironment?, scripted: inout Bool
    ) throws(RejectionReason) {
        // The other environment's gateway has never seen the token.
        if let environment, device.environment != environment { throw .badDeviceToken }
        if device.unregisteredAt != nil { throw .unregistered }
        guard device.topic == push.baseTopic else { throw .deviceTokenNotForTopic }
        if var script = device.scriptedError {
            if let remaining = script.remaining {
                script.remaining = remaining - 1
                device.scriptedError = remaining > 1 ? script : nil
            }
            scripted = true
            throw script.reason
        }
    }

    /// Counts one provider response.
    mutating func countResponse(status: Int, reason: RejectionReason?) {
        if status == 200, reason == nil {
            successResponses += 1
            return
        }
        metrics.responses[APNsMetrics.Response(status: status, reason: reason?.rawValue ?? ""), default: 0] += 1
    }

    /// The counters, with the 200 answers folded in.
    var metricsSnapshot: APNsMetrics {
        var snapshot = metrics
        if successResponses > 0 {
            snapshot.responses[APNsMetrics.Response(status: 200, reason: ""), default: 0] += successResponses
        }
        return snapshot
    }

    /// A random (version 4) UUID in lowercase text, from OpenSSL's DRBG (Foundation's `UUID()` reads the
    /// system's random device on every call); the bytes are drawn 4 KiB at a time.
    mutating func randomUUID() -> String {
        if randomOffset + 16 > randomBytes.count {
            randomBytes = SecureRandom.bytes(4096)
            randomOffset = 0
        }
        let offset = randomOffset
        randomOffset += 16
        return randomBytes.withUnsafeBufferPointer { pool in
            UUID(randomBytes: UnsafeBufferPointer(rebasing: pool[offset..<(offset + 16)])).lowercasedText
        }
    }

    // MARK: Routing

    /// Delivers, throttles, stores or drops `notification` for the device at `index` (from
    /// ``checkDevice(for:)``, with the table unchanged since), recording the outcome.
    mutating func route(_ notification: PendingNotification, device index: DeviceIndex, now: Date) {
        // Take the table out of `self` (an O(1) move) so the record can be changed in place.
        var table = devices
        devices = [:]
        defer { devices = table }
        route(notification, device: &table.values[index], now: now)
    }

    private mutating func route(_ notification: PendingNotification, device: inout DeviceRecord, now: Date) {
        let at = millisecondsSince1970(now)
        let budget = configuration.backgroundBudget
        if notification.pushType == .background, budget > 0 {
            let window = configuration.backgroundWindow
            device.backgroundDeliveries.removeAll { now.timeIntervalSince($0) >= window }
            if device.backgroundDeliveries.count >= budget {
                if notification.expiration == 0 {
                    drop(notification, at: at, detail: "background budget exhausted and apns-expiration is 0")
                    return
                }
                if let previous = device.deferred {
                    coalesce(previous, into: notification, at: at)
                }
                device.deferred = notification
                pendingWork.insert(device.token)
                metrics.throttled += 1
                log.update(notification.logSequence, .throttled, at: at, detail: "background budget exhausted")
                return
            }
        }
        if send(notification, to: &device) {
            if notification.pushType == .background { device.backgroundDeliveries.append(now) }
            metrics.delivered += 1
            log.update(notification.logSequence, .delivered, at: at)
            return
        }
        if notification.expiration == 0 {
            drop(notification, at: at, detail: "device offline and apns-expiration is 0")
            return
        }
        if notification.isExpired(now: now) {
            expire(notification, at: at)
            return
        }
        if let previous = device.stored {
            coalesce(previous, into: notification, at: at)
        }
        device.stored = notification
        if notification.expiration != nil { pendingWork.insert(device.token) }
        metrics.stored += 1
        log.update(notification.logSequence, .stored, at: at, detail: "device offline")
    }

    /// Sends to every open stream of the device; streams that are gone are removed.
    private mutating func send(_ notification: PendingNotification, to device: inout DeviceRecord) -> Bool {
        guard device.online, !device.sinks.isEmpty else { return false }
        var sent = false
        for (id, sink) in device.sinks {
            if sink.send(notification.eventData) {
                sent = true
            } else {
                device.sinks[id] = nil
                metrics.eventStreams -= 1
            }
        }
        if device.sinks.isEmpty { metrics.connectedDevices -= 1 }
        if sent { device.delivered += 1 }
        return sent
    }

    private mutating func coalesce(_ previous: PendingNotification, into next: PendingNotification, at: Int64) {
        metrics.coalesced += 1
        log.update(previous.logSequence, .coalesced, at: at, detail: "replaced by \(next.apnsID)")
    }

    private mutating func drop(_ notification: PendingNotification, at: Int64, detail: String) {
        metrics.dropped += 1
        log.update(notification.logSequence, .dropped, at: at, detail: detail)
    }

    private mutating func expire(_ notification: PendingNotification, at: Int64) {
        metrics.expired += 1
        log.update(notification.logSequence, .expired, at: at, detail: "apns-expiration passed")
    }

    // MARK: Streams and registry

    mutating func connect(_ token: String, sink: APNsDeviceSink, now: Date) -> UInt64? {
        guard var device = devices.removeValue(forKey: token) else { return nil }
        defer { devices[token] = device }
        guard device.unregisteredAt == nil else { return nil }
        let id = nextStreamID
        nextStreamID += 1
        if device.sinks.isEmpty { metrics.connectedDevices += 1 }
        device.sinks[id] = sink
        metrics.eventStreams += 1
        if device.online { releaseStored(&device, now: now) }
        return id
    }

    /// Routes what was stored for the device while it was away (now reachable), or expires it.
    private mutating func releaseStored(_ device: inout DeviceRecord, now: Date) {
        guard let stored = device.stored else { return }
        device.stored = nil
        if stored.isExpired(now: now) {
            expire(stored, at: millisecondsSince1970(now))
        } else {
            route(stored, device: &device, now: now)
        }
    }

    /// Changes an active (registered, not deleted) device in place; `false` if there is none.
    mutating func updateActive(_ token: String, _ change: (inout DeviceRecord) -> Void) -> Bool {
        guard let index = devices.index(forKey: token), devices.values[index].unregisteredAt == nil else {
            return false
        }
        change(&devices.values[index])
        return true
    }

    /// Holds the device offline or brings it back; back online, with a stream open, it gets what was stored.
    /// Returns `false` if the device is not active.
    mutating func setOnline(_ token: String, _ online: Bool, now: Date) -> Bool {
        guard var device = devices.removeValue(forKey: token) else { return false }
        defer { devices[token] = device }
        guard device.unregisteredAt == nil else { return false }
        device.online = online
        if online, !device.sinks.isEmpty { releaseStored(&device, now: now) }
        return true
    }

    mutating func disconnect(_ token: String, streamID: UInt64) {
        guard devices[token]?.sinks.removeValue(forKey: streamID) != nil else { return }
        metrics.eventStreams -= 1
        if devices[token]?.sinks.isEmpty == true { metrics.connectedDevices -= 1 }
    }

    /// Marks the device deleted and returns its streams to close, or `nil` if it was not active.
    mutating func unregister(_ token: String, at now: Int64) -> [APNsDeviceSink]? {
        guard var device = devices.removeValue(forKey: token) else { return nil }
        defer { devices[token] = device }
        guard device.unregisteredAt == nil else { return nil }
        device.unregisteredAt = max(now, device.registeredAt + 1)
        metrics.registeredDevices -= 1
        for held in [device.stored, device.deferred].compactMap({ $0 }) {
            drop(held, at: now, detail: "device unregistered")
        }
        device.stored = nil
        device.deferred = nil
        pendingWork.remove(token)
        let sinks = Array(device.sinks.values)
        if !sinks.isEmpty { metrics.connectedDevices -= 1 }
        metrics.eventStreams -= sinks.count
        device.sinks = [:]
        return sinks
    }

    // MARK: Time

    mutating func processDueWork(now: Date) {
        let at = millisecondsSince1970(now)
        for token in pendingWork {
            guard var device = devices.removeValue(forKey: token) else {
                pendingWork.remove(token)
                continue
            }
            if let deferred = device.deferred {
                if deferred.isExpired(now: now) {
                    device.deferred = nil
                    expire(deferred, at: at)
                } else {
                    let window = configuration.backgroundWindow
                    device.backgroundDeliveries.removeAll { now.timeIntervalSince($0) >= window }
                    if device.backgroundDeliveries.count < configuration.backgroundBudget {
                        device.deferred = nil
                        route(deferred, device: &device, now: now)
                    }
                }
            }
            if let stored = device.stored, stored.isExpired(now: now) {
                device.stored = nil
                expire(stored, at: at)
            }
            if device.deferred == nil, device.stored?.expiration == nil { pendingWork.remove(token) }
            devices[token] = device
        }
    }
}
