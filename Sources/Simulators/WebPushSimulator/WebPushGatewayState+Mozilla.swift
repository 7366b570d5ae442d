import Foundation
import OpenSSLCrypto
import SimulatorSupport

/// Mozilla's WebSocket push protocol: browsers (by uaid), their channels, notifications and acknowledgements.
extension WebPushGatewayState {
    /// WebSocket close statuses the protocol uses.
    enum CloseStatus {
        /// A frame that is not a protocol message, or one out of order.
        static let protocolError: Int32 = 1002
        /// Another connection said hello with the same uaid.
        static let replaced: Int32 = 4000
    }

    mutating func mozillaOpened(_ connection: UInt64) {
        connections[connection] = .some(nil)
    }

    mutating func mozillaClosed(_ connection: UInt64) {
        guard let uaid = connections.removeValue(forKey: connection) ?? nil else { return }
        if users[uaid]?.connection == connection { users[uaid]?.connection = nil }
    }

    mutating func mozillaReceived(_ connection: UInt64, _ text: String, now: Date) {
        guard let transport, let bound = connections[connection] else { return }
        let message: MozillaClientMessage
        do {
            message = try MozillaClientMessage.parse(text)
        } catch {
            transport.close(connection, CloseStatus.protocolError)
            return
        }
        if case .hello(let uaid, _) = message {
            guard bound == nil else {
                transport.close(connection, CloseStatus.protocolError)
                return
            }
            hello(connection, uaid: uaid, now: now)
            return
        }
        if case .ping = message {
            _ = transport.send(connection, MozillaServerMessage.ping.text)
            return
        }
        guard let uaid = bound else {
            transport.close(connection, CloseStatus.protocolError)
            return
        }
        switch message {
        case .register(let channelID, let key):
            _ = transport.send(connection, register(uaid: uaid, channelID: channelID, key: key).text)
        case .unregister(let channelID):
            if let id = users[uaid]?.channels[channelID] { _ = delete(id, now: now) }
            _ = transport.send(connection, MozillaServerMessage.unregister(channelID: channelID, status: 200).text)
        case .ack(let updates):
            acknowledge(uaid: uaid, updates: updates, now: now)
        case .nack(let version, let code):
            // Firefox sends a nack after the ack when the service worker's push handler failed.
            guard let sequence = users[uaid]?.recentVersions[version] else { break }
            metrics.clientErrors += 1
            log.update(
                sequence, .clientError, at: millisecondsSince1970(now),
                detail: "nack code \(code.map(String.init) ?? "none"): the service worker's push handler failed")
        case .broadcastSubscribe, .hello, .ping:
            break
        }
    }

    /// `hello`: the client's uaid is kept whenever it sent one (Firefox drops every subscription when the uaid
    /// changes, so one the sim does not know, e.g. after a restart, is adopted), else a new one is made; another
    /// socket of the same uaid is closed; unacknowledged notifications go out again, then what was kept for its
    /// channels.
    private mutating func hello(_ connection: UInt64, uaid requested: String?, now: Date) {
        guard let transport else { return }
        var uaid: String
        if let requested, Self.isUAID(requested) {
            uaid = requested
        } else {
            uaid = SecureRandom.hex(16)
            while users[uaid] != nil { uaid = SecureRandom.hex(16) }
        }
        if users[uaid] == nil { users[uaid] = MozillaUser(uaid: uaid) }
        if let previous = users[uaid]?.connection, previous != connection {
            connections[previous] = .some(nil)
            transport.close(previous, CloseStatus.replaced)
        }
        users[uaid]?.connection = connection
        connections[connection] = uaid
        _ = transport.send(connection, MozillaServerMessage.hello(uaid: uaid).text)
        let resend = users[uaid]?.unacknowledged ?? []
        users[uaid]?.unacknowledged = []
        let timestamp = millisecondsSince1970(now)
        for pending in resend {
            guard subscriptions[pending.subscriptionID]?.deleted == false else { continue }
            if pending.message.expiresAt <= now {
                metrics.expired += 1
                log.update(pending.message.logSequence, .expired, at: timestamp, detail: "not acknowledged in time")
                continue
            }
            let frame = MozillaServerMessage.notification(
                channelID: pending.channelID, version: pending.message.messageID,
                data: Self.data(of: pending.message), ttl: pending.message.ttl)
            if transport.send(connection, frame.text) {
                users[uaid]?.unacknowledged.append(pending)
                log.update(pending.message.logSequence, .delivered, at: timestamp, detail: "sent again after hello")
            }
        }
        for id in (users[uaid]?.channels.values).map(Array.init) ?? [] { drainIfReachable(id, now: now) }
    }

    private static func data(of message: QueuedMessage) -> String? {
        guard case .ciphertext(let body) = message.payload, !body.isEmpty else { return nil }
        return Base64URL.encode(body)
    }

    /// `register`: a subscription bound to the uaid and channel (the same one again for the same key).
    private mutating func register(uaid: String, channelID: String, key: String?) -> MozillaServerMessage {
        guard UUID(uuidString: channelID) != nil || Self.isPlainUUID(channelID) else {
            return .register(channelID: channelID, status: 400, pushEndpoint: nil)
        }
        var keyBytes: [UInt8]?
        if let key, !key.isEmpty {
            guard let bytes = Base64URL.decode(key), (try? P256PublicKey(rawRepresentation: bytes)) != nil else {
                return .register(channelID: channelID, status: 400, pushEndpoint: nil)
            }
            keyBytes = bytes
        }
        if let existing = users[uaid]?.channels[channelID], let record = subscriptions[existing], !record.deleted,
            record.applicationServerKey == keyBytes
        {
            return .register(channelID: channelID, status: 200, pushEndpoint: endpoint(of: existing))
        }
        let id = add(holder: .mozilla(uaid: uaid, channelID: channelID), applicationServerKey: keyBytes)
        users[uaid]?.channels[channelID] = id
        return .register(channelID: channelID, status: 200, pushEndpoint: endpoint(of: id))
    }

    /// What Firefox accepts as a uaid: 1 to 128 printable ASCII characters.
    static func isUAID(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 128 && text.utf8.allSatisfy { (0x21...0x7e).contains($0) }
    }

    private static func isPlainUUID(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    private mutating func acknowledge(uaid: String, updates: [MozillaClientMessage.Update], now: Date) {
        let timestamp = millisecondsSince1970(now)
        for update in updates {
            guard
                let index = users[uaid]?.unacknowledged.firstIndex(where: {
                    $0.message.messageID == update.version && $0.channelID == update.channelID
                }), let pending = users[uaid]?.unacknowledged.remove(at: index)
            else { continue }
            users[uaid]?.remember(version: update.version, sequence: pending.message.logSequence)
            switch update.code {
            case 101:
                metrics.undecryptable += 1
                log.update(
                    pending.message.logSequence, .undecryptable, at: timestamp,
                    detail: "undecryptable: the browser could not decrypt it (ack code 101)")
            case 102:
                metrics.dropped += 1
                log.update(
                    pending.message.logSequence, .dropped, at: timestamp,
                    detail: "the browser did not deliver it (ack code 102)")
            case let code:
                metrics.acknowledged += 1
                log.update(
                    pending.message.logSequence, .acknowledged, at: timestamp,
                    detail: code.flatMap { $0 == 100 ? nil : "ack code \($0)" })
            }
        }
    }
}
