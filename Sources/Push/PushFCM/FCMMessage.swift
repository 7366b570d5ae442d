import Foundation
import JSONText
import Push

/// The FCM HTTP v1 form of a content-free signal: a data-only message, Google's "send to sync".
///
/// ```json
/// {"message":{"token":"…","data":{"acct":"<alias>","st":"<tag>","badge":"3"},
///             "android":{"priority":"normal","collapse_key":"<alias>","ttl":"3600s"}}}
/// ```
///
/// `data` holds only the signal's fields, as strings (`badge` for badge signals only); there is no
/// `notification` block. Priority is `normal` for background signals (Google's advice for sync) and `high` for
/// badge signals, which the app turns into a visible notification. The collapse key is the device's alias: a
/// newer signal replaces an older one waiting for the device.
struct FCMMessage: Sendable {
    /// How long FCM keeps a signal for an offline device: after an hour the device syncs by itself anyway.
    static let timeToLive = 3600

    let token: String
    let signal: PushSignal

    /// The request body, byte for byte (keys in the order above).
    var body: [UInt8] {
        var data = ["\"acct\":\(JSONText.quoted(signal.alias.rawValue))"]
        if let tag = signal.tag { data.append("\"st\":\(JSONText.quoted(tag.rawValue))") }
        if let badge = signal.badge { data.append("\"badge\":\"\(badge)\"") }
        let priority = signal.kind == .badge ? "high" : "normal"
        let json =
            "{\"message\":{\"token\":\(JSONText.quoted(token)),\"data\":{\(data.joined(separator: ","))},"
            + "\"android\":{\"priority\":\"\(priority)\",\"collapse_key\":\(JSONText.quoted(signal.alias.rawValue)),"
            + "\"ttl\":\"\(Self.timeToLive)s\"}}}"
        return Array(json.utf8)
    }
}

/// The last check before an FCM request leaves: the serialized body must be a data-only message whose `data`
/// holds only `acct` (an alias), `st` (a state tag) and `badge` (digits), all strings, with `android` holding only
/// `priority`, `collapse_key` and `ttl`. Anything else is a defect and is never sent.
enum FCMPayloadGuard {
    /// Why a body was refused.
    struct Violation: Error, Equatable {
        var reason: String
    }

    static func check(_ body: [UInt8]) throws(Violation) {
        guard body.count <= 4096,
            let root = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any],
            root.count == 1, let message = root["message"] as? [String: Any]
        else { throw Violation(reason: "not a message object") }
        guard Set(message.keys).isSubset(of: ["token", "data", "android"]), message["token"] is String else {
            throw Violation(reason: "message fields")
        }
        guard let data = message["data"] as? [String: Any], Set(data.keys).isSubset(of: ["acct", "st", "badge"]),
            let alias = data["acct"] as? String, (try? DeviceAlias(alias)) != nil
        else { throw Violation(reason: "data fields") }
        if let tag = data["st"] {
            guard let tag = tag as? String, (try? StateTag(tag)) != nil else { throw Violation(reason: "st") }
        }
        if let badge = data["badge"] {
            guard let badge = badge as? String, !badge.isEmpty, badge.count <= 9,
                badge.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
            else { throw Violation(reason: "badge") }
        }
        if let android = message["android"] {
            guard let android = android as? [String: Any],
                Set(android.keys).isSubset(of: ["priority", "collapse_key", "ttl"])
            else { throw Violation(reason: "android fields") }
        }
    }
}
