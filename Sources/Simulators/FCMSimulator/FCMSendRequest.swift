import Foundation
import JSONText

/// Whom a message goes to: exactly one of a registration token, a topic or a condition.
public enum FCMTarget: Sendable, Equatable {
    /// One app instance.
    case token(String)
    /// The devices subscribed to a topic (fcm-sim has no subscriptions: accepted, delivered to nobody).
    case topic(String)
    /// A topic condition expression (accepted, delivered to nobody).
    case condition(String)
}

/// Android delivery priority (`android.priority`).
public enum FCMPriority: String, Sendable, Codable {
    /// Delivered when the device is awake; the default for data messages.
    case normal
    /// Delivered at once, waking the device.
    case high
}

/// A validated `POST /v1/projects/{project}/messages:send` body, reduced to what delivery needs.
public struct FCMSendRequest: Sendable, Equatable {
    /// The target.
    public var target: FCMTarget
    /// The data payload (`android.data` when given, else `message.data`).
    public var data: [String: String]
    /// The Android priority.
    public var priority: FCMPriority
    /// `android.collapse_key`: a newer message with the same key replaces an undelivered older one.
    public var collapseKey: String?
    /// `android.ttl` in seconds; `nil` for FCM's default of 28 days.
    public var ttl: Double?
    /// Whether the message has a `notification` block.
    public var hasNotification: Bool
    /// `validate_only`: check, answer, deliver nothing.
    public var validateOnly: Bool

    /// The longest `ttl`: 28 days.
    public static let maximumTTL: Double = 28 * 24 * 3600
    /// The largest data payload, keys and values together, in bytes.
    public static let maximumDataSize = 4096
}

/// Validates a send body the way the FCM v1 API's proto3 JSON parser does: unknown fields, wrong types, a
/// missing or double target, non-string data values, an oversized payload, a bad priority or TTL are
/// `400 INVALID_ARGUMENT` naming the field.
public enum FCMSendRequestParser {
    private static let rootFields: Set<String> = ["message", "validate_only"]
    private static let messageFields: Set<String> = [
        "name", "data", "notification", "android", "webpush", "apns", "fcm_options", "token", "topic", "condition",
    ]
    private static let androidFields: Set<String> = [
        "collapse_key", "priority", "ttl", "restricted_package_name", "data", "notification", "fcm_options",
        "direct_boot_ok", "bandwidth_constrained_ok", "restricted_satellite_ok",
    ]
    private static let notificationFields: Set<String> = ["title", "body", "image"]
    /// proto3 JSON accepts each field's lowerCamelCase name as well.
    private static let camelNames: [String: String] = [
        "validateOnly": "validate_only", "fcmOptions": "fcm_options", "collapseKey": "collapse_key",
        "restrictedPackageName": "restricted_package_name", "directBootOk": "direct_boot_ok",
        "bandwidthConstrainedOk": "bandwidth_constrained_ok", "restrictedSatelliteOk": "restricted_satellite_ok",
    ]

    /// Parses and validates `body`.
    public static func parse(_ body: Data) throws(FCMAPIError) -> FCMSendRequest {
        guard let root = JSONValue.parse(body) else {
            throw .invalid("Invalid JSON payload received. Unexpected token.")
        }
        guard case .object(let rootObject) = root else {
            throw .invalid("Invalid JSON payload received. Expected an object.")
        }
        let request = try fields(rootObject, allowed: rootFields, at: nil)
        var validateOnly = false
        if let flag = request["validate_only"] {
            guard case .bool(let value) = flag else {
                throw .invalid("Invalid value at 'validate_only' (TYPE_BOOL), \(render(flag))", field: "validate_only")
            }
            validateOnly = value
        }
        guard let messageValue = request["message"] else {
            throw .invalid("Request contains an invalid argument: the message is not set.", field: "message")
        }
        let message = try fields(try object(messageValue, at: "message"), allowed: messageFields, at: "message")

        var targets: [FCMTarget] = []
        for name in ["token", "topic", "condition"] {
            guard let value = message[name] else { continue }
            let text = try string(value, at: "message.\(name)")
            switch name {
            case "token": targets.append(.token(text))
            case "topic":
                guard isValidTopic(text) else {
                    throw .invalid("Invalid topic name \(text)", field: "message.topic")
                }
                targets.append(.topic(text))
            default: targets.append(.condition(text))
            }
            if targets.count > 1 {
                throw .invalid(
                    "Invalid value at 'message' (oneof), oneof field 'target' is already set. Cannot set '\(name)'",
                    field: "message")
            }
        }
        guard let target = targets.first else {
            throw .invalid("Recipient of the message is not set.", field: "message")
        }
        if case .token(let token) = target, token.isEmpty {
            throw .invalid("The registration token is not a valid FCM registration token", field: "message.token")
        }
        if let name = message["name"] { _ = try string(name, at: "message.name") }
        var data = try stringMap(message["data"], at: "message.data")
        var hasNotification = false
        if let notification = message["notification"] {
            try checkNotification(notification, at: "message.notification")
            hasNotification = true
        }
        for name in ["webpush", "apns", "fcm_options"] {
            if let value = message[name] { _ = try object(value, at: "message.\(name)") }
        }

        var priority = FCMPriority.normal
        var collapseKey: String?
        var ttl: Double?
        if let androidValue = message["android"] {
            let android = try fields(
                try object(androidValue, at: "message.android"), allowed: androidFields,
                at: "message.android")
            if let value = android["collapse_key"] {
                collapseKey = try string(value, at: "message.android.collapse_key")
            }
            if let value = android["priority"] {
                let text = try string(value, at: "message.android.priority")
                guard let parsed = FCMPriority(rawValue: text.lowercased()) else {
                    throw .invalid(
                        "Invalid value at 'message.android.priority' "
                            + "(type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), \"\(text)\"",
                        field: "message.android.priority")
                }
                priority = parsed
            }
            if let value = android["ttl"] {
                ttl = try duration(try string(value, at: "message.android.ttl"), at: "message.android.ttl")
            }
            if let value = android["restricted_package_name"] {
                _ = try string(value, at: "message.android.restricted_package_name")
            }
            if android["data"] != nil { data = try stringMap(android["data"], at: "message.android.data") }
            if let value = android["notification"] {
                _ = try object(value, at: "message.android.notification")
                hasNotification = true
            }
            if let value = android["fcm_options"] { _ = try object(value, at: "message.android.fcm_options") }
            for name in ["direct_boot_ok", "bandwidth_constrained_ok", "restricted_satellite_ok"] {
                if let value = android[name], value.bool == nil {
                    throw .invalid(
                        "Invalid value at 'message.android.\(name)' (TYPE_BOOL), \(render(value))",
                        field: "message.android.\(name)")
                }
            }
        }
        for key in data.keys where isReservedDataKey(key) {
            throw .invalid("Invalid data payload key: \(key)", field: "message.data")
        }
        let size = data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        guard size <= FCMSendRequest.maximumDataSize else {
            throw .invalid("Android message is too big", field: "message.data")
        }
        return FCMSendRequest(
            target: target, data: data, priority: priority, collapseKey: collapseKey, ttl: ttl,
            hasNotification: hasNotification, validateOnly: validateOnly)
    }

    /// An object's members read by their proto field names: a member may be written under the field's name or its
    /// lowerCamelCase name, and a `null` member counts as absent.
    struct ProtoFields {
        let members: [String: JSONValue]

        subscript(name: String) -> JSONValue? {
            let value = members[name] ?? camelAliases[name].flatMap { members[$0] }
            return value == .null ? nil : value
        }
    }

    /// The lowerCamelCase name of each field that has one.
    private static let camelAliases = Dictionary(uniqueKeysWithValues: camelNames.map { ($0.value, $0.key) })

    /// `object` checked against the fields a message may have: an unknown name is an error, the first in key order
    /// named.
    private static func fields(
        _ object: [String: JSONValue], allowed: Set<String>, at path: String?
    ) throws(FCMAPIError) -> ProtoFields {
        var unknown: String?
        for name in object.keys where !allowed.contains(camelNames[name] ?? name) {
            if unknown.map({ name < $0 }) ?? true { unknown = name }
        }
        if let unknown {
            let location = path.map { " at '\($0)'" } ?? ""
            throw .invalid(
                "Invalid JSON payload received. Unknown name \"\(unknown)\"\(location): Cannot find field.",
                field: path ?? unknown)
        }
        return ProtoFields(members: object)
    }

    private static func object(_ value: JSONValue, at path: String) throws(FCMAPIError) -> [String: JSONValue] {
        guard case .object(let object) = value else {
            throw .invalid("Invalid value at '\(path)' (TYPE_MESSAGE), \(render(value))", field: path)
        }
        return object
    }

    private static func string(_ value: JSONValue, at path: String) throws(FCMAPIError) -> String {
        guard case .string(let text) = value else {
            throw .invalid("Invalid value at '\(path)' (TYPE_STRING), \(render(value))", field: path)
        }
        return text
    }

    private static func stringMap(_ value: JSONValue?, at path: String) throws(FCMAPIError) -> [String: String] {
        guard let value else { return [:] }
        let map = try object(value, at: path)
        var result: [String: String] = [:]
        result.reserveCapacity(map.count)
        for (key, entry) in map {
            guard case .string(let text) = entry else {
                // Google names the entry by its place in key order.
                for (index, (_, entry)) in map.sorted(by: { $0.key < $1.key }).enumerated() {
                    _ = try string(entry, at: "\(path)[\(index)].value")
                }
                break
            }
            result[key] = text
        }
        return result
    }

    private static func checkNotification(_ value: JSONValue, at path: String) throws(FCMAPIError) {
        let notification = try fields(try object(value, at: path), allowed: notificationFields, at: path)
        for (name, entry) in notification.members where entry != .null {
            _ = try string(entry, at: "\(path).\(name)")
        }
    }

    /// A proto3 JSON `Duration`: seconds with up to nine fractional digits and an `s`, e.g. `3600s`, `3.5s`.
    static func duration(_ text: String, at path: String) throws(FCMAPIError) -> Double {
        let bytes = Array(text.utf8)
        var index = 0
        var digits = 0
        while index < bytes.count, (0x30...0x39).contains(bytes[index]) {
            index += 1
            digits += 1
        }
        var fraction = 0
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            while index < bytes.count, (0x30...0x39).contains(bytes[index]) {
                index += 1
                fraction += 1
            }
            if fraction == 0 { digits = 0 }
        }
        guard digits > 0, digits <= 12, fraction <= 9, index == bytes.count - 1, bytes[index] == UInt8(ascii: "s"),
            let seconds = Double(text.dropLast())
        else {
            throw .invalid(
                "Invalid value at '\(path)' (type.googleapis.com/google.protobuf.Duration), \"\(text)\"",
                field: path)
        }
        guard seconds <= FCMSendRequest.maximumTTL else {
            throw .invalid("The TTL must not exceed 28 days (2419200s), got \(text)", field: path)
        }
        return seconds
    }

    private static func isValidTopic(_ topic: String) -> Bool {
        !topic.isEmpty && topic.utf8.count <= 900
            && topic.unicodeScalars.allSatisfy {
                ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
                    || "-_.~%".unicodeScalars.contains($0)
            }
    }

    private static func isReservedDataKey(_ key: String) -> Bool {
        key == "from" || key == "message_type" || key.hasPrefix("google") || key.hasPrefix("gcm")
    }

    /// A value as Google's error text shows it: strings quoted, containers elided.
    private static func render(_ value: JSONValue) -> String {
        switch value {
        case .string(let text): return "\"\(text)\""
        case .bool(let flag): return flag ? "true" : "false"
        case .int(let number): return String(number)
        case .double(let number): return JSONText.number(number)
        case .array: return "[...]"
        case .object: return "{...}"
        case .null: return "null"
        }
    }
}
