import Foundation
import JSONText
import OpenSSLCrypto
import SimulatorSupport

/// The keys the simulated browser made for a subscription (it keeps the private key to decrypt).
struct SimulatedBrowserKeys: Sendable {
    var privateKey: P256PrivateKey
    var publicKey: [UInt8]
    var authSecret: [UInt8]
}

/// One subscription.
struct SubscriptionRecord: Sendable {
    enum Holder: Sendable {
        /// The sim plays the browser.
        case simulated(SimulatedBrowserKeys)
        /// A device on the message stream holds the keys (it gave the public half, `p256dh` and `auth`, when it
        /// subscribed, as a browser's push client would): the sim checks the layout and forwards the ciphertext.
        case device(p256dh: [UInt8], auth: [UInt8])
        /// A browser on the Mozilla WebSocket protocol holds the keys.
        case mozilla(uaid: String, channelID: String)
    }

    var id: String
    var number: Int
    var holder: Holder
    var applicationServerKey: [UInt8]?
    var online = true
    var deleted = false
    var sinks: [UInt64: WebPushMessageSink] = [:]
    var queue = MessageQueue()
    var delivered = 0
    var bodyLengths: [Int] = []
    var scripted: WebPushScriptedError?
}

/// A Mozilla-protocol browser (its uaid): its channels, its socket, what it was sent and has not acknowledged.
struct MozillaUser: Sendable {
    struct Unacknowledged: Sendable {
        var channelID: String
        var subscriptionID: String
        var message: QueuedMessage
    }

    var uaid: String
    var connection: UInt64?
    /// channelID → subscription id.
    var channels: [String: String] = [:]
    var unacknowledged: [Unacknowledged] = []
    /// Versions acknowledged lately and their log entries (a nack follows its ack), at most 100.
    var recentVersions: [String: Int] = [:]
    private var recentOrder: [String] = []

    init(uaid: String) { self.uaid = uaid }

    mutating func remember(version: String, sequence: Int) {
        if recentVersions.updateValue(sequence, forKey: version) == nil { recentOrder.append(version) }
        while recentOrder.count > 100 { recentVersions[recentOrder.removeFirst()] = nil }
    }
}

/// Everything a ``WebPushGateway`` keeps, behind its lock.
struct WebPushGatewayState: SimulatorControlState {
    let configuration: WebPushGatewayConfiguration
    var endpointBase: String
    var subscriptions: [String: SubscriptionRecord] = [:]
    var nextNumber = 1
    var nextStreamID: UInt64 = 1
    var log: CaptureLog<WebPushLogEntry>
    var metrics = WebPushMetrics()
    var faults: SimulatorFaults
    var generator: SeededGenerator
    var users: [String: MozillaUser] = [:]
    /// Open Mozilla-protocol connections and the uaid each said hello with.
    var connections: [UInt64: String?] = [:]
    var transport: MozillaTransport?
    var vapidCache = VAPIDCheck.Cache()
    /// A distributor's request budget per subscription: tokens left and when they were counted.
    var distributorBudgets: [String: (tokens: Double, at: Date)] = [:]

    init(configuration: WebPushGatewayConfiguration) {
        self.configuration = configuration
        endpointBase = configuration.endpointBase
        log = CaptureLog(capacity: configuration.logCapacity)
        faults = configuration.faults
        generator = SeededGenerator(seed: configuration.faults.seed)
    }

    var origin: String { WebPushGatewayConfiguration.origin(of: endpointBase) ?? endpointBase }

    func endpoint(of id: String) -> String { endpointBase + "/wpush/" + id }

    /// The path every push resource starts with: the endpoint base's path, then `/wpush/`.
    var resourcePrefix: String {
        let path = URLComponents(string: endpointBase)?.path ?? ""
        return (path.hasSuffix("/") ? String(path.dropLast()) : path) + "/wpush/"
    }

    var metricsSnapshot: WebPushMetrics {
        var snapshot = metrics
        snapshot.subscriptions = subscriptions.values.filter { !$0.deleted }.count
        snapshot.eventStreams = subscriptions.values.reduce(0) { $0 + $1.sinks.count }
        snapshot.mozillaConnections = connections.values.filter { $0 != nil }.count
        return snapshot
    }

    // MARK: Push resource

    private struct Accepted {
        var headers: PushHeaders
        var dropped: Bool
    }

    mutating func push(
        _ request: SimulatorProviderRequest, subscriptionID: String?, now: Date
    ) -> SimulatorProviderResponse {
        let timestamp = millisecondsSince1970(now)
        var entry = WebPushLogEntry(
            sequence: 0, timestamp: timestamp, httpVersion: request.httpVersion, method: request.method,
            path: String(request.path.prefix(200)), subscription: subscriptionID.map { String($0.prefix(64)) },
            headers: WebPushLoggedHeaders(
                ttl: request.header("ttl").map { String($0.prefix(64)) },
                urgency: request.header("urgency").map { String($0.prefix(64)) },
                topic: request.header("topic").map { String($0.prefix(64)) },
                contentEncoding: request.header("content-encoding").map { String($0.prefix(64)) },
                contentType: request.header("content-type").map { String($0.prefix(64)) }),
            bodyBytes: request.body.count, status: 201, outcome: .refused, events: [])
        var detail: String?
        let result = Result { () throws(WebPushAPIError) -> Accepted in
            guard let subscriptionID, var record = subscriptions[subscriptionID] else {
                throw WebPushAPIError(status: 404, errno: 102, message: "No such subscription.")
            }
            guard !record.deleted else {
                // ntfy has no "gone": a topic nobody subscribes to any more is not found.
                if configuration.distributor == .ntfy {
                    throw WebPushAPIError(status: 404, errno: 102, message: "topic not found")
                }
                throw WebPushAPIError(status: 410, errno: 106, message: "The subscription is no longer valid.")
            }
            guard request.method == "POST" else {
                throw WebPushAPIError(status: 405, errno: 999, message: "Push resources take POST (RFC 8030 §5).")
            }
            let vapid = VAPIDCheck.check(
                request.header("authorization"), expectedKey: record.applicationServerKey, origin: origin, now: now,
                maxLifetime: configuration.maxTokenLifetime, cache: &vapidCache)
            entry.vapid = vapid.summary
            if let error = vapid.error { throw error }
            var headers = try PushHeaders.parse(request, maxTTL: configuration.maxTTL)
            try PushHeaders.checkBody(request, maxBytes: configuration.maxBodyBytes)
            if configuration.distributor == .ntfy {
                try chargeDistributorBudget(subscriptionID, now: now)
                // ntfy keeps every message: a Topic replaces nothing.
                headers.topic = nil
            }
            if let scripted = record.scripted {
                if let count = scripted.count {
                    record.scripted =
                        count > 1
                        ? WebPushScriptedError(
                            status: scripted.status, count: count - 1, retryAfter: scripted.retryAfter)
                        : nil
                    subscriptions[subscriptionID] = record
                }
                detail = "scripted"
                throw WebPushAPIError(
                    status: scripted.status, errno: Self.errno(forStatus: scripted.status),
                    message: "A scripted answer for this subscription.", retryAfter: scripted.retryAfter)
            }
            switch faults.draw(using: &generator) {
            case .status503:
                detail = "fault"
                throw WebPushAPIError(status: 503, errno: 201, message: "Service temporarily unavailable.")
            case .status429:
                detail = "fault"
                throw WebPushAPIError(status: 429, errno: 999, message: "Too many requests.")
            case .drop:
                detail = "fault"
                return Accepted(headers: headers, dropped: true)
            case .none:
                return Accepted(headers: headers, dropped: false)
            }
        }
        let delay = faults.latency
        let accepted: Accepted
        switch result {
        case .failure(let error):
            entry.status = error.status
            entry.error = error.message
            entry.events = [WebPushLogEvent(outcome: .refused, timestamp: timestamp, detail: detail)]
            log.append(entry)
            metrics.responses[error.status, default: 0] += 1
            return error.response(delay: delay, distributor: configuration.distributor)
        case .success(let value):
            accepted = value
        }
        // The record is changed in place from here on: a copy would copy its queue on every push.
        guard let subscriptionID, let holder = subscriptions[subscriptionID]?.holder else {
            return WebPushAPIError(status: 404, errno: 102, message: "No such subscription.").response()
        }
        let messageID = SecureRandom.hex(16)
        entry.messageId = messageID
        let response: SimulatorProviderResponse
        switch configuration.distributor {
        case nil:
            response = SimulatorProviderResponse(
                status: 201,
                headers: [("location", endpointBase + "/m/" + messageID), ("ttl", String(accepted.headers.ttl))],
                delay: delay)
        case .ntfy:
            // ntfy answers a publish with the message it stored.
            let seconds = Int64(now.timeIntervalSince1970)
            let message: JSONValue = [
                "id": .string(String(messageID.prefix(12))), "time": .int(seconds),
                "expires": .int(seconds + Int64(accepted.headers.ttl)), "event": "message",
                "topic": .string(subscriptionID),
            ]
            response = SimulatorProviderResponse(
                status: 200, headers: [("content-type", "application/json")], body: Data(message.jsonBytes),
                delay: delay)
        }
        entry.status = response.status
        metrics.responses[response.status, default: 0] += 1
        let body = [UInt8](request.body)
        if !body.isEmpty, subscriptions[subscriptionID]?.bodyLengths.contains(body.count) == false {
            subscriptions[subscriptionID]?.bodyLengths.append(body.count)
        }
        let opened = Self.open(body, for: holder)
        if case .success(let payload) = opened { entry.layout = payload.layout }
        let sequence = log.append(entry)
        if case .failure(let error) = opened {
            metrics.undecryptable += 1
            log.update(sequence, .undecryptable, at: timestamp, detail: "undecryptable: \(error)")
            return response
        }
        if accepted.dropped {
            metrics.dropped += 1
            log.update(sequence, .dropped, at: timestamp, detail: detail)
            return response
        }
        guard case .success(let payload) = opened else { return response }
        let message = QueuedMessage(
            messageID: messageID, payload: payload.payload, bodyBytes: body.count, ttl: accepted.headers.ttl,
            urgency: accepted.headers.urgency, topic: accepted.headers.topic, acceptedAt: now, logSequence: sequence)
        let reachableNow = subscriptions[subscriptionID].map(reachable) ?? false
        let events = subscriptions[subscriptionID]?.queue.accept(message, reachable: reachableNow, now: now) ?? []
        apply(events, subscriptionID: subscriptionID, now: now)
        return response
    }

    /// ntfy's request budget of a topic: a burst of 60, then one more every 5 seconds; over it, 429.
    private mutating func chargeDistributorBudget(_ subscriptionID: String, now: Date) throws(WebPushAPIError) {
        let burst = 60.0
        var budget = distributorBudgets[subscriptionID] ?? (burst, now)
        budget.tokens = min(burst, budget.tokens + max(0, now.timeIntervalSince(budget.at)) / 5)
        budget.at = now
        guard budget.tokens >= 1 else {
            distributorBudgets[subscriptionID] = budget
            throw WebPushAPIError(status: 429, errno: 999, message: "limit reached: too many requests")
        }
        budget.tokens -= 1
        distributorBudgets[subscriptionID] = budget
    }

    static func errno(forStatus status: Int) -> Int {
        switch status {
        case 401, 403: 109
        case 404: 102
        case 410: 106
        case 413: 104
        case 503: 201
        default: 999
        }
    }

    /// What the holder of the keys gets from `body`: the simulated browser decrypts it (RFC 8291, one record,
    /// the 0x02 delimiter); for a Mozilla-protocol browser only the layout is checked and the ciphertext goes on.
    static func open(
        _ body: [UInt8], for holder: SubscriptionRecord.Holder
    ) -> Result<(payload: QueuedMessage.Payload, layout: WebPushBodyLayout?), WebPushEncryption.DecryptionError> {
        switch holder {
        case .simulated(let keys):
            guard !body.isEmpty else { return .success((.plaintext(""), nil)) }
            do {
                let decrypted = try WebPushEncryption.decrypt(
                    body, receiverKey: keys.privateKey, authSecret: keys.authSecret)
                return .success(
                    (
                        .plaintext(String(decoding: decrypted.plaintext, as: UTF8.self)),
                        WebPushBodyLayout(recordSize: decrypted.recordSize, paddingLength: decrypted.paddingLength)
                    ))
            } catch {
                return .failure(error)
            }
        case .mozilla, .device:
            guard !body.isEmpty else { return .success((.ciphertext([]), nil)) }
            return EncryptedBodyLayout.check(body).map {
                (.ciphertext(body), WebPushBodyLayout(recordSize: $0, paddingLength: nil))
            }
        }
    }

    // MARK: Delivery

    func reachable(_ record: SubscriptionRecord) -> Bool {
        guard record.online, !record.deleted else { return false }
        switch record.holder {
        case .simulated, .device: return !record.sinks.isEmpty
        case .mozilla(let uaid, _): return users[uaid]?.connection != nil
        }
    }

    /// Carries out a queue's events for subscription `id`: delivers, counts, logs.
    mutating func apply(_ events: [QueueEvent], subscriptionID id: String, now: Date) {
        let timestamp = millisecondsSince1970(now)
        for event in events {
            switch event {
            case .deliver(let message):
                if deliver(message, to: id) {
                    subscriptions[id]?.delivered += 1
                    metrics.delivered += 1
                    log.update(message.logSequence, .delivered, at: timestamp)
                } else {
                    let again = subscriptions[id]?.queue.accept(message, reachable: false, now: now) ?? []
                    apply(again, subscriptionID: id, now: now)
                }
            case .stored(let message):
                metrics.stored += 1
                let online = subscriptions[id]?.online ?? false
                log.update(message.logSequence, .stored, at: timestamp, detail: online ? "no listener" : "offline")
            case .replaced(let message, let by):
                metrics.replaced += 1
                log.update(message.logSequence, .replaced, at: timestamp, detail: "replaced by \(by)")
            case .expired(let message):
                metrics.expired += 1
                log.update(message.logSequence, .expired, at: timestamp)
            case .dropped(let message, let reason):
                metrics.dropped += 1
                log.update(message.logSequence, .dropped, at: timestamp, detail: reason)
            }
        }
    }

    /// Hands `message` to the subscription's listener; `false` when none took it.
    private mutating func deliver(_ message: QueuedMessage, to id: String) -> Bool {
        guard var record = subscriptions[id] else { return false }
        switch record.holder {
        case .simulated, .device:
            var event: [String: JSONValue] = [
                "messageId": .string(message.messageID), "bodyBytes": .int(Int64(message.bodyBytes)),
                "ttl": .int(Int64(message.ttl)), "urgency": .string(message.urgency.rawValue),
                "topic": message.topic.map(JSONValue.string) ?? .null,
            ]
            switch message.payload {
            case .plaintext(let text):
                event["plaintext"] = .string(text)
            case .ciphertext(let body):
                // The device decrypts it with its own keys.
                event["plaintext"] = .null
                event["body"] = .string(Base64URL.encode(body))
            }
            let json = JSONValue.object(event).json
            var sent = false
            for (streamID, sink) in record.sinks {
                if sink.send(json) { sent = true } else { record.sinks[streamID] = nil }
            }
            subscriptions[id] = record
            return sent
        case .mozilla(let uaid, let channelID):
            guard case .ciphertext(let body) = message.payload, let connection = users[uaid]?.connection,
                let transport
            else { return false }
            let frame = MozillaServerMessage.notification(
                channelID: channelID, version: message.messageID, data: body.isEmpty ? nil : Base64URL.encode(body),
                ttl: message.ttl)
            guard transport.send(connection, frame.text) else { return false }
            users[uaid]?.unacknowledged.append(
                MozillaUser.Unacknowledged(channelID: channelID, subscriptionID: id, message: message))
            return true
        }
    }

    /// A subscription may have become reachable: what it kept goes out.
    mutating func drainIfReachable(_ id: String, now: Date) {
        guard subscriptions[id].map({ reachable($0) && $0.queue.count > 0 }) == true else { return }
        let events = subscriptions[id]?.queue.drain(now: now) ?? []
        apply(events, subscriptionID: id, now: now)
    }

    mutating func processDueWork(now: Date) {
        for id in Array(subscriptions.keys) {
            guard subscriptions[id].map({ !$0.deleted && $0.queue.count > 0 }) == true,
                let events = subscriptions[id]?.queue.expire(now: now), !events.isEmpty
            else { continue }
            apply(events, subscriptionID: id, now: now)
        }
    }

    // MARK: Subscriptions

    mutating func add(holder: SubscriptionRecord.Holder, applicationServerKey: [UInt8]?) -> String {
        var id = Base64URL.encode(SecureRandom.bytes(24))
        while subscriptions[id] != nil { id = Base64URL.encode(SecureRandom.bytes(24)) }
        subscriptions[id] = SubscriptionRecord(
            id: id, number: nextNumber, holder: holder, applicationServerKey: applicationServerKey)
        nextNumber += 1
        return id
    }

    /// Deletes a subscription: later pushes get 410, what it kept is dropped. Returns its streams to close, or
    /// `nil` if it is unknown or already deleted.
    mutating func delete(_ id: String, now: Date) -> [WebPushMessageSink]? {
        guard var record = subscriptions[id], !record.deleted else { return nil }
        record.deleted = true
        let sinks = Array(record.sinks.values)
        record.sinks = [:]
        let timestamp = millisecondsSince1970(now)
        for message in record.queue.removeAll() {
            metrics.dropped += 1
            log.update(message.logSequence, .dropped, at: timestamp, detail: "subscription deleted")
        }
        subscriptions[id] = record
        if case .mozilla(let uaid, let channelID) = record.holder, users[uaid]?.channels[channelID] == id {
            users[uaid]?.channels[channelID] = nil
        }
        return sinks
    }

    func summary(_ record: SubscriptionRecord) -> WebPushSubscriptionSummary {
        var summary = WebPushSubscriptionSummary(
            id: record.id, kind: "simulated", endpoint: endpoint(of: record.id),
            applicationServerKey: record.applicationServerKey.map { Base64URL.encode($0) }, online: record.online,
            listeners: record.sinks.count, delivered: record.delivered, stored: record.queue.count,
            bodyLengths: record.bodyLengths, uniformBodyLength: record.bodyLengths.count <= 1)
        if case .device = record.holder { summary.kind = "device" }
        if case .mozilla(let uaid, let channelID) = record.holder {
            summary.kind = "mozilla"
            summary.uaid = uaid
            summary.channelID = channelID
            summary.listeners = users[uaid]?.connection == nil ? 0 : 1
        }
        return summary
    }
}
