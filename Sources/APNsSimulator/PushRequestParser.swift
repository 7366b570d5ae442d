import Foundation

extension RejectionReason: Error {}

/// A provider request that passed every stateless check.
struct ParsedPush: Sendable {
    var deviceToken: String
    var topic: String
    /// The topic without the suffix its push type requires (the app's bundle id).
    var baseTopic: String
    var pushType: PushType
    var priority: Int
    var expiration: Int64?
    var collapseID: String?
    /// The payload as compact single-line JSON text.
    var payloadJSON: String
}

/// Apple's stateless request rules, one reason per rule.
enum PushRequestParser {
    static let pathPrefix = "/3/device/"

    /// The method and path rules; returns the device token text from the path.
    static func checkTarget(_ request: ProviderRequest) throws(RejectionReason) -> String {
        guard request.method == "POST" else { throw .methodNotAllowed }
        let bytes = request.path.utf8
        if bytes.allSatisfy({ $0 < 0x80 }) {
            // ASCII (every real path): the same rules on bytes, without Unicode-aware comparisons.
            let end = bytes.firstIndex(of: UInt8(ascii: "?")) ?? bytes.endIndex
            let path = request.path.utf8[..<end]
            if path.elementsEqual("/3/device".utf8) || path.elementsEqual(pathPrefix.utf8) {
                throw .missingDeviceToken
            }
            guard path.starts(with: pathPrefix.utf8) else { throw .badPath }
            let token = path.dropFirst(pathPrefix.utf8.count)
            guard !token.contains(UInt8(ascii: "/")) else { throw .badPath }
            return String(Substring(token))
        }
        var path = Substring(request.path)
        if let query = path.firstIndex(of: "?") { path = path[..<query] }
        if path == "/3/device" || path == pathPrefix { throw .missingDeviceToken }
        guard path.hasPrefix(pathPrefix) else { throw .badPath }
        let token = path.dropFirst(pathPrefix.count)
        guard !token.utf8.contains(UInt8(ascii: "/")) else { throw .badPath }
        return String(token)
    }

    /// A distinct bit for each header that may appear only once, `nil` for other names.
    static func singleValuedHeaderBit(_ name: String) -> UInt8? {
        switch name {
        case "authorization": return 1 << 0
        case "apns-id": return 1 << 1
        case "apns-topic": return 1 << 2
        case "apns-push-type": return 1 << 3
        case "apns-priority": return 1 << 4
        case "apns-expiration": return 1 << 5
        case "apns-collapse-id": return 1 << 6
        default: return nil
        }
    }

    /// Repeated headers and the `apns-id` format.
    static func checkHeaders(_ request: ProviderRequest) throws(RejectionReason) {
        var seen: UInt8 = 0
        for header in request.headers {
            guard let bit = singleValuedHeaderBit(header.name) else { continue }
            guard seen & bit == 0 else { throw .duplicateHeaders }
            seen |= bit
        }
        if let apnsID = request.header("apns-id"), !isUUID(apnsID) { throw .badMessageId }
    }

    /// Every rule about topic, token, headers and payload (authentication is checked before this).
    static func parse(_ request: ProviderRequest, tokenText: String) throws(RejectionReason) -> ParsedPush {
        guard let topic = request.header("apns-topic") else { throw .missingTopic }
        guard isValidTopic(topic) else { throw .badTopic }
        guard tokenText.utf8.count == 64, tokenText.utf8.allSatisfy(isHexDigit) else { throw .badDeviceToken }

        var priority = 10
        if let text = request.header("apns-priority") {
            guard let value = Int(text), [1, 5, 10].contains(value) else { throw .badPriority }
            priority = value
        }
        var pushType = PushType.alert
        if let text = request.header("apns-push-type") {
            guard let value = PushType(rawValue: text) else { throw .invalidPushType }
            pushType = value
        }
        var baseTopic = topic
        if let suffix = pushType.topicSuffix {
            guard topic.hasSuffix(suffix), topic.count > suffix.count else { throw .invalidPushType }
            baseTopic = String(topic.dropLast(suffix.count))
        }
        var expiration: Int64?
        if let text = request.header("apns-expiration") {
            guard let value = Int64(text), value >= 0 else { throw .badExpirationDate }
            expiration = value
        }
        let collapseID = request.header("apns-collapse-id")
        if let collapseID, collapseID.utf8.count > 64 { throw .badCollapseId }

        guard !request.body.isEmpty else { throw .payloadEmpty }
        guard request.body.count <= pushType.maximumPayloadSize else { throw .payloadTooLarge }
        let background = pushType == .background
        guard
            case .object(let contentAvailableIsOne) = PayloadCheck.check(
                request.body, needsContentAvailable: background)
        else { throw .badPayload }
        if background {
            guard priority == 5, contentAvailableIsOne == true else { throw .invalidPushType }
        }
        // Line breaks can only be whitespace between JSON tokens (inside strings they are escaped).
        var text = String(decoding: request.body, as: UTF8.self)
        let hasLineBreak = request.body.contains { $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\r") }
        if hasLineBreak, text.contains(where: { $0 == "\n" || $0 == "\r" || $0 == "\r\n" }) {
            text = String(text.map { $0 == "\n" || $0 == "\r" || $0 == "\r\n" ? " " : $0 })
        }
        return ParsedPush(
            deviceToken: tokenText.lowercased(), topic: topic, baseTopic: baseTopic, pushType: pushType,
            priority: priority, expiration: expiration, collapseID: collapseID, payloadJSON: text)
    }

    static func isUUID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                guard byte == UInt8(ascii: "-") else { return false }
            } else if !isHexDigit(byte) {
                return false
            }
        }
        return true
    }

    static func isValidTopic(_ topic: String) -> Bool {
        guard !topic.isEmpty, topic.utf8.count <= 255, !topic.hasPrefix("."), !topic.hasSuffix(".") else {
            return false
        }
        return topic.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        }
    }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x46) || (byte >= 0x61 && byte <= 0x66)
    }
}
