import Foundation
import JSONText

/// A client message of Mozilla's WebSocket push protocol (what Firefox speaks to `dom.push.serverURL`): JSON text
/// frames with a `messageType`, and `{}` as a ping.
enum MozillaClientMessage: Sendable, Equatable {
    /// One entry of an `ack`'s `updates`: the notification and the client's code (100 delivered, 101 could not
    /// decrypt, 102 other failure).
    struct Update: Sendable, Equatable {
        var channelID: String
        var version: String
        var code: Int?
    }

    /// `{"messageType":"hello","uaid"?,"channelIDs"?,"use_webpush"?}`.
    case hello(uaid: String?, channelIDs: [String])
    /// `{"messageType":"register","channelID","key"?}`; `key` is the application server key, base64url.
    case register(channelID: String, key: String?)
    /// `{"messageType":"unregister","channelID","code"?}`.
    case unregister(channelID: String)
    /// `{"messageType":"ack","updates":[…]}`.
    case ack([Update])
    /// `{"messageType":"nack","version","code"?}`: the client could not handle a notification.
    case nack(version: String, code: Int?)
    /// `{"messageType":"broadcast_subscribe",…}`: broadcasts the sim does not have.
    case broadcastSubscribe
    /// `{}`.
    case ping

    /// Why a frame is not a protocol message (the connection is then closed).
    struct ParseError: Error, Equatable, CustomStringConvertible {
        var description: String
    }

    /// Reads one text frame.
    static func parse(_ text: String) throws(ParseError) -> MozillaClientMessage {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
            throw ParseError(description: "not a JSON object")
        }
        if object.isEmpty { return .ping }
        guard let type = object["messageType"] as? String else { throw ParseError(description: "no messageType") }
        switch type.lowercased() {
        case "hello":
            let uaid = object["uaid"] as? String
            let channels = (object["channelIDs"] as? [Any])?.compactMap { $0 as? String } ?? []
            return .hello(uaid: uaid?.isEmpty == true ? nil : uaid, channelIDs: channels)
        case "register":
            guard let channel = object["channelID"] as? String else { throw ParseError(description: "no channelID") }
            return .register(channelID: channel, key: object["key"] as? String)
        case "unregister":
            guard let channel = object["channelID"] as? String else { throw ParseError(description: "no channelID") }
            return .unregister(channelID: channel)
        case "ack":
            guard let updates = object["updates"] as? [[String: Any]] else {
                throw ParseError(description: "ack without updates")
            }
            return .ack(
                updates.compactMap { update in
                    guard let channel = update["channelID"] as? String, let version = update["version"] as? String
                    else { return nil }
                    return Update(channelID: channel, version: version, code: update["code"] as? Int)
                })
        case "nack":
            guard let version = object["version"] as? String else {
                throw ParseError(description: "nack without version")
            }
            return .nack(version: version, code: object["code"] as? Int)
        case "broadcast_subscribe":
            return .broadcastSubscribe
        case "ping":
            return .ping
        default:
            throw ParseError(description: "unknown messageType")
        }
    }
}

/// A server message of Mozilla's WebSocket push protocol.
enum MozillaServerMessage: Sendable, Equatable {
    /// The answer to `hello`.
    case hello(uaid: String)
    /// The answer to `register`: 200 with the endpoint, or an error status.
    case register(channelID: String, status: Int, pushEndpoint: String?)
    /// The answer to `unregister`.
    case unregister(channelID: String, status: Int)
    /// A push message for one of the client's channels; `data` is the body in base64url (none without a body).
    case notification(channelID: String, version: String, data: String?, ttl: Int)
    /// The answer to a ping.
    case ping

    /// The frame's JSON text.
    var text: String {
        let object: [String: JSONValue]
        switch self {
        case .hello(let uaid):
            object = [
                "messageType": "hello", "uaid": .string(uaid), "status": 200, "use_webpush": true, "broadcasts": [:],
            ]
        case .register(let channelID, let status, let endpoint):
            var fields: [String: JSONValue] = [
                "messageType": "register", "channelID": .string(channelID), "status": .int(Int64(status)),
            ]
            if let endpoint { fields["pushEndpoint"] = .string(endpoint) }
            object = fields
        case .unregister(let channelID, let status):
            object = ["messageType": "unregister", "channelID": .string(channelID), "status": .int(Int64(status))]
        case .notification(let channelID, let version, let data, let ttl):
            var fields: [String: JSONValue] = [
                "messageType": "notification", "channelID": .string(channelID), "version": .string(version),
                "ttl": .int(Int64(ttl)),
            ]
            if let data {
                fields["data"] = .string(data)
                fields["headers"] = ["encoding": "aes128gcm"]
            }
            object = fields
        case .ping:
            object = [:]
        }
        return JSONValue.object(object).json
    }
}
