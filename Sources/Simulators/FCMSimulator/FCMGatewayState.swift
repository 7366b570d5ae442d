import Foundation
import HTTPTypes
import JSONText
import OpenSSLCrypto
import SimulatorSupport

/// One app instance.
struct FCMDeviceRecord: Sendable {
    var token: String
    var app: String
    var project: String
    var number: Int
    var online = true
    var uninstalled = false
    var sinks: [UInt64: FCMMessageSink] = [:]
    var delivered = 0
    var queue: DeviceQueue
    var scripted: FCMScriptedError?
    /// The per-device rate: the minute counted and the sends in it.
    var rateWindow: (minute: Int64, count: Int) = (0, 0)

    var reachable: Bool { online && !sinks.isEmpty && !uninstalled }
}

/// Everything an ``FCMGateway`` keeps, behind its lock.
struct FCMGatewayState: SimulatorControlState {
    static let jsonHeaders: [(name: String, value: String)] = [("content-type", "application/json; charset=UTF-8")]

    let configuration: FCMGatewayConfiguration
    var issuer: TokenIssuer
    var devices: [String: FCMDeviceRecord] = [:]
    var nextDeviceNumber = 1
    var nextStreamID: UInt64 = 1
    /// Makes each message id unique within the process; the id's other part is the time it was accepted.
    var messageCounter: UInt64 = 0
    var log: FCMCaptureLog
    var metrics = FCMMetrics()
    var faults: SimulatorFaults
    var generator: SeededGenerator
    /// The project quota: per project, the minute counted and the sends in it.
    var projectWindows: [String: (minute: Int64, count: Int)] = [:]

    init(configuration: FCMGatewayConfiguration, now: Date) {
        self.configuration = configuration
        issuer = TokenIssuer(accounts: configuration.serviceAccounts, lifetime: configuration.tokenLifetime)
        log = FCMCaptureLog(capacity: configuration.logCapacity)
        faults = configuration.faults
        generator = SeededGenerator(seed: configuration.faults.seed)
    }

    var metricsSnapshot: FCMMetrics {
        var snapshot = metrics
        snapshot.tokenRequests = issuer.requests
        snapshot.tokensIssued = issuer.issued
        snapshot.eventStreams = devices.values.reduce(0) { $0 + $1.sinks.count }
        return snapshot
    }

    static func methodNotAllowed() -> SimulatorProviderResponse {
        let error = FCMAPIError(code: 405, message: "Method not allowed; use POST.")
        return SimulatorProviderResponse(status: 405, headers: Self.jsonHeaders, body: error.body)
    }

    // MARK: Token endpoint

    mutating func grant(_ request: SimulatorProviderRequest, now: Date) -> SimulatorProviderResponse {
        let (issuerEmail, result) = issuer.grant(form: request.body, now: now)
        let timestamp = millisecondsSince1970(now)
        let response: SimulatorProviderResponse
        var entry = FCMLogEntry(
            sequence: 0, timestamp: timestamp, kind: "token", httpVersion: request.httpVersion,
            clientEmail: issuerEmail, status: 200, outcome: .granted,
            events: [])
        switch result {
        case .success(let json):
            response = SimulatorProviderResponse(status: 200, headers: Self.jsonHeaders, body: json)
        case .failure(let error):
            entry.status = 400
            entry.errorCode = error.error
            entry.outcome = .refused
            response = SimulatorProviderResponse(status: 400, headers: Self.jsonHeaders, body: error.body)
        }
        entry.events = [FCMLogEvent(outcome: entry.outcome, timestamp: timestamp, detail: nil)]
        _ = log.append(entry)
        return response
    }

    // MARK: messages:send

    mutating func send(
        _ request: SimulatorProviderRequest, message parsed: Result<FCMSendRequest, FCMAPIError>, project: String,
        now: Date
    ) -> SimulatorProviderResponse {
        let timestamp = millisecondsSince1970(now)
        let limit = configuration.logBodyLimit
        var entry = FCMLogEntry(
            sequence: 0, timestamp: timestamp, kind: "send", httpVersion: request.httpVersion, project: project,
            body: request.body.withUnsafeBytes { raw in
                String(
                    decoding: UnsafeRawBufferPointer(rebasing: raw.prefix(limit)).assumingMemoryBound(to: UInt8.self),
                    as: UTF8.self)
            },
            bodyTruncated: request.body.count > limit, status: 200, outcome: .refused, events: [])
        var detail: String?
        var accepted: (FCMSendRequest, dropped: Bool)?
        let outcome: Result<String, FCMAPIError> = Result { () throws(FCMAPIError) -> String in
            try authenticate(request, project: project, now: now, entry: &entry)
            try chargeProjectQuota(project, now: now)
            let message = try parsed.get()
            if case .token(let registration) = message.target {
                entry.token = registration.utf8.count <= 512 ? registration : String(registration.prefix(512))
                try checkDevice(registration, project: project, now: now, detail: &detail)
            }
            if message.validateOnly { return "fake_message_id" }
            var dropped = false
            switch faults.draw(using: &generator) {
            case .status503:
                detail = "fault"
                throw FCMAPIError(.unavailable)
            case .status429:
                detail = "fault"
                throw FCMAPIError(.quotaExceeded)
            case .drop:
                detail = "fault"
                dropped = true
            case .none: break
            }
            accepted = (message, dropped)
            return nextMessageID(now: now)
        }
        let delay = faults.latency
        switch outcome {
        case .failure(let error):
            entry.status = error.code
            entry.errorCode = error.errorCode?.rawValue ?? error.status
            entry.events = [FCMLogEvent(outcome: .refused, timestamp: timestamp, detail: detail)]
            _ = log.append(entry)
            metrics.responses[FCMMetrics.Response(status: error.code, errorCode: entry.errorCode ?? ""), default: 0] +=
                1
            var headers = Self.jsonHeaders
            if let retryAfter = error.retryAfter { headers.append(("retry-after", String(retryAfter))) }
            return SimulatorProviderResponse(status: error.code, headers: headers, body: error.body, delay: delay)
        case .success(let messageID):
            metrics.responses[FCMMetrics.Response(status: 200, errorCode: ""), default: 0] += 1
            let name = "projects/\(project)/messages/\(messageID)"
            var bytes = Array(#"{"name":"#.utf8)
            JSONText.appendQuoted(name, to: &bytes)
            bytes.append(UInt8(ascii: "}"))
            let body = Data(bytes)
            let response = SimulatorProviderResponse(status: 200, headers: Self.jsonHeaders, body: body, delay: delay)
            guard let (message, dropped) = accepted else {
                entry.outcome = .validated
                entry.events = [FCMLogEvent(outcome: .validated, timestamp: timestamp, detail: nil)]
                _ = log.append(entry)
                return response
            }
            entry.messageId = messageID
            guard case .token(let registration) = message.target, !dropped else {
                let outcome: FCMOutcome = dropped ? .dropped : .accepted
                if dropped { metrics.dropped += 1 }
                entry.outcome = outcome
                entry.events = [FCMLogEvent(outcome: outcome, timestamp: timestamp, detail: detail)]
                _ = log.append(entry)
                return response
            }
            let sequence = log.append(entry)
            let queued = QueuedMessage(
                messageID: messageID, data: message.data, priority: message.priority, collapseKey: message.collapseKey,
                ttl: message.ttl, acceptedAt: now, logSequence: sequence)
            // The record is changed where it lies: a copy would share its queue and copy it on the first change.
            guard let index = devices.index(forKey: registration) else { return response }
            let reachable = devices.values[index].reachable
            let events = devices.values[index].queue.accept(queued, reachable: reachable, now: now)
            Self.apply(events, to: &devices.values[index], metrics: &metrics, log: &log, now: now)
            return response
        }
    }

    /// Checks the bearer token and that its account may send for `project`.
    private func authenticate(
        _ request: SimulatorProviderRequest, project: String, now: Date, entry: inout FCMLogEntry
    ) throws(FCMAPIError) {
        var bearer: String?
        if let value = request.header("authorization") {
            if let space = value.utf8.firstIndex(of: UInt8(ascii: " ")),
                HTTPHeaders.namesMatch(String(value[..<space]), "Bearer")
            {
                var token = value[value.utf8.index(after: space)...]
                while token.first == " " || token.first == "\t" { token = token.dropFirst() }
                while token.last == " " || token.last == "\t" { token = token.dropLast() }
                bearer = String(token)
            }
        }
        let token = try issuer.check(bearer, now: now).get()
        entry.clientEmail = token.clientEmail
        guard issuer.knowsProject(project) else {
            throw FCMAPIError(code: 404, message: "Requested entity was not found.")
        }
        guard token.projectID == project else {
            throw FCMAPIError(
                code: 403,
                message: "Permission 'cloudmessaging.messages.create' denied on resource "
                    + "'//cloudresourcemanager.googleapis.com/projects/\(project.prefix(100))' (or it may not exist).",
                reason: "IAM_PERMISSION_DENIED")
        }
    }

    private mutating func chargeProjectQuota(_ project: String, now: Date) throws(FCMAPIError) {
        guard let quota = configuration.projectQuotaPerMinute else { return }
        let minute = Int64(now.timeIntervalSince1970 / 60)
        var window = projectWindows[project] ?? (minute, 0)
        if window.minute != minute { window = (minute, 0) }
        guard window.count < quota else {
            throw FCMAPIError(
                .quotaExceeded, message: "Quota exceeded for quota metric 'Messages sent' of project \(project).",
                retryAfter: Self.secondsToNextMinute(now))
        }
        window.count += 1
        projectWindows[project] = window
    }

    private mutating func checkDevice(
        _ token: String, project: String, now: Date, detail: inout String?
    ) throws(FCMAPIError) {
        guard let index = devices.index(forKey: token) else {
            throw FCMAPIError.invalid(
                "The registration token is not a valid FCM registration token", field: "message.token")
        }
        if devices.values[index].uninstalled { throw FCMAPIError(.unregistered) }
        guard devices.values[index].project == project else { throw FCMAPIError(.senderIDMismatch) }
        if let scripted = devices.values[index].scripted {
            if let count = scripted.count {
                devices.values[index].scripted =
                    count > 1
                    ? FCMScriptedError(
                        status: scripted.status, errorCode: scripted.errorCode, count: count - 1,
                        retryAfter: scripted.retryAfter) : nil
            }
            detail = "scripted"
            var error = FCMAPIError(scripted.errorCode, retryAfter: scripted.retryAfter)
            error.code = scripted.status
            throw error
        }
        if let rate = configuration.deviceRatePerMinute {
            let minute = Int64(now.timeIntervalSince1970 / 60)
            var window = devices.values[index].rateWindow
            if window.minute != minute { window = (minute, 0) }
            guard window.count < rate else {
                throw FCMAPIError(
                    .quotaExceeded, message: "Message rate exceeded for this device.",
                    retryAfter: Self.secondsToNextMinute(now))
            }
            window.count += 1
            devices.values[index].rateWindow = window
        }
    }

    private static func secondsToNextMinute(_ now: Date) -> Int {
        let seconds = now.timeIntervalSince1970
        return max(1, Int((60 - seconds.truncatingRemainder(dividingBy: 60)).rounded(.up)))
    }

    /// An id shaped like FCM's (`0:<microseconds>%<16 hex digits>`).
    private mutating func nextMessageID(now: Date) -> String {
        messageCounter &+= 1
        let micros = UInt64(max(0, now.timeIntervalSince1970 * 1_000_000))
        let counter = String(messageCounter, radix: 16)
        return "0:\(micros)%" + String(repeating: "0", count: max(0, 16 - counter.utf8.count)) + counter
    }

    // MARK: Delivery

    /// Carries out a queue's events: delivers to the streams, counts, logs.
    mutating func apply(_ events: [QueueEvent], to device: inout FCMDeviceRecord, now: Date) {
        Self.apply(events, to: &device, metrics: &metrics, log: &log, now: now)
    }

    /// ``apply(_:to:now:)`` on the parts it changes, so a record can be changed where it lies in ``devices``.
    static func apply(
        _ events: [QueueEvent], to device: inout FCMDeviceRecord, metrics: inout FCMMetrics, log: inout FCMCaptureLog,
        now: Date
    ) {
        let timestamp = millisecondsSince1970(now)
        for event in events {
            switch event {
            case .deliver(let message):
                var sent = false
                for (id, sink) in device.sinks {
                    if sink.send(message.eventJSON) { sent = true } else { device.sinks[id] = nil }
                }
                if sent {
                    device.delivered += 1
                    metrics.delivered += 1
                    log.update(message.logSequence, .delivered, at: timestamp)
                } else {
                    let again = device.queue.accept(message, reachable: false, now: now)
                    apply(again, to: &device, metrics: &metrics, log: &log, now: now)
                }
            case .stored(let message):
                metrics.stored += 1
                log.update(
                    message.logSequence, .stored, at: timestamp, detail: device.online ? "not connected" : "offline")
            case .throttled(let message):
                metrics.throttled += 1
                log.update(message.logSequence, .throttled, at: timestamp)
            case .collapsed(let message, let by):
                metrics.collapsed += 1
                log.update(message.logSequence, .collapsed, at: timestamp, detail: "collapsed by \(by)")
            case .expired(let message):
                metrics.expired += 1
                log.update(message.logSequence, .expired, at: timestamp)
            case .dropped(let message, let reason):
                metrics.dropped += 1
                log.update(message.logSequence, .dropped, at: timestamp, detail: reason)
            }
        }
    }

    mutating func processDueWork(now: Date) {
        // Each record is changed where it lies (a copy would copy its queue too); the keys do not change.
        var index = devices.startIndex
        while index != devices.endIndex {
            if !devices.values[index].uninstalled, devices.values[index].queue.count > 0 {
                let reachable = devices.values[index].reachable
                let events = devices.values[index].queue.tick(reachable: reachable, now: now)
                if !events.isEmpty {
                    Self.apply(events, to: &devices.values[index], metrics: &metrics, log: &log, now: now)
                }
            }
            devices.formIndex(after: &index)
        }
    }

    // MARK: Devices

    mutating func register(app: String, project: String, now: Date) -> String? {
        guard issuer.knowsProject(project) else { return nil }
        var token = Self.makeToken()
        while devices[token] != nil { token = Self.makeToken() }
        devices[token] = FCMDeviceRecord(
            token: token, app: app, project: project, number: nextDeviceNumber,
            queue: DeviceQueue(
                burst: configuration.collapsibleBurst, refillSeconds: configuration.collapsibleRefillSeconds,
                maxCollapseKeys: configuration.maxCollapseKeys, maxPending: configuration.maxPendingMessages, now: now))
        nextDeviceNumber += 1
        metrics.registeredDevices += 1
        return token
    }

    /// A registration token shaped like FCM's: 22 characters, `:APA91b`, 134 characters (163 in all, from
    /// letters of both cases, digits, `-` and `_`).
    static func makeToken() -> String {
        SecureRandom.base64URL(16) + ":APA91b" + String(SecureRandom.base64URL(101).prefix(134))
    }

    mutating func uninstall(_ token: String, now: Date) -> [FCMMessageSink]? {
        guard var device = devices[token], !device.uninstalled else { return nil }
        device.uninstalled = true
        let timestamp = millisecondsSince1970(now)
        for message in device.queue.removeAll() {
            metrics.dropped += 1
            log.update(message.logSequence, .dropped, at: timestamp, detail: "uninstalled")
        }
        let sinks = Array(device.sinks.values)
        device.sinks = [:]
        device.scripted = nil
        devices[token] = device
        metrics.registeredDevices -= 1
        return sinks
    }

    mutating func connect(_ token: String, sink: FCMMessageSink, now: Date) -> UInt64? {
        guard var device = devices[token], !device.uninstalled else { return nil }
        let id = nextStreamID
        nextStreamID += 1
        device.sinks[id] = sink
        if device.reachable {
            let events = device.queue.drain(now: now)
            apply(events, to: &device, now: now)
        }
        devices[token] = device
        return id
    }

    mutating func disconnect(_ token: String, streamID: UInt64) {
        devices[token]?.sinks[streamID] = nil
    }

    mutating func setOnline(_ online: Bool, _ token: String, now: Date) -> Bool {
        guard var device = devices[token], !device.uninstalled else { return false }
        device.online = online
        if device.reachable {
            let events = device.queue.drain(now: now)
            apply(events, to: &device, now: now)
        }
        devices[token] = device
        return true
    }
}
