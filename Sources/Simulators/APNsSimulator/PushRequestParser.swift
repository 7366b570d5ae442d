import Foundation
import HTTPTypes

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
    static func checkTarget(_ request: APNsProviderRequest) throws(RejectionReason) -> String {
        guard request.method == "POST" else { throw .methodNotAllowed }
        if let result = request.path.utf8.withContiguousStorageIfAvailable(asciiTarget) ?? nil {
            return try result.get()
        }
        var path = Substring(request.path)
        if let query = path.firstIndex(of: "?") { path = path[..<query] }
        if path == "/3/device" || path == pathPrefix { throw .missingDeviceToken }
        guard path.hasPrefix(pathPrefix) else { throw .badPath }
        let token = path.dropFirst(pathPrefix.count)
        guard !token.utf8.contains(UInt8(ascii: "/")) else { throw .badPath }
        return String(token)
    }

    /// The target rules on the bytes of an ASCII path (every real path), without Unicode-aware
    /// comparisons; `nil` when the path is not ASCII (the caller then applies them on characters).
    private static func asciiTarget(_ path: UnsafeBufferPointer<UInt8>) -> Result<String, RejectionReason>? {
        guard path.allSatisfy({ $0 < 0x80 }) else { return nil }
        return Result { () throws(RejectionReason) in try asciiToken(path) }
    }

    private static func asciiToken(_ path: UnsafeBufferPointer<UInt8>) throws(RejectionReason) -> String {
        let end = path.firstIndex(of: UInt8(ascii: "?")) ?? path.endIndex
        let target = UnsafeBufferPointer(rebasing: path[..<end])
        let prefix: StaticString = "/3/device/"
        let prefixBytes = UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount)
        if target.count <= prefixBytes.count, target.elementsEqual(prefixBytes.prefix(target.count)),
            target.count >= prefixBytes.count - 1
        {
            throw .missingDeviceToken
        }
        guard target.count > prefixBytes.count, target.prefix(prefixBytes.count).elementsEqual(prefixBytes) else {
            throw .badPath
        }
        let token = UnsafeBufferPointer(rebasing: target[prefixBytes.count...])
        guard !token.contains(UInt8(ascii: "/")) else { throw .badPath }
        return String(decoding: token, as: UTF8.self)
    }

    /// A distinct bit for each header that may appear only once, `nil` for other names. The length
    /// picks the candidates, so most names are compared at most twice.
    static func singleValuedHeaderBit(_ name: String) -> UInt8? {
        switch name.utf8.count {
        case 7: return name == "apns-id" ? KnownHeaders.apnsIDBit : nil
        case 10: return name == "apns-topic" ? KnownHeaders.topicBit : nil
        case 13:
            if name == "authorization" { return KnownHeaders.authorizationBit }
            return name == "apns-priority" ? KnownHeaders.priorityBit : nil
        case 14: return name == "apns-push-type" ? KnownHeaders.pushTypeBit : nil
        case 15: return name == "apns-expiration" ? KnownHeaders.expirationBit : nil
        case 16: return name == "apns-collapse-id" ? KnownHeaders.collapseIDBit : nil
        default: return nil
        }
    }

    /// The values of the headers that may appear only once, taken in one pass over the request's fields
    /// (the first value of each, as ``APNsProviderRequest/header(_:)`` gives it).
    struct KnownHeaders {
        static let authorizationBit: UInt8 = 1 << 0
        static let apnsIDBit: UInt8 = 1 << 1
        static let topicBit: UInt8 = 1 << 2
        static let pushTypeBit: UInt8 = 1 << 3
        static let priorityBit: UInt8 = 1 << 4
        static let expirationBit: UInt8 = 1 << 5
        static let collapseIDBit: UInt8 = 1 << 6

        var authorization: String?
        var apnsID: String?
        var topic: String?
        var pushType: String?
        var priority: String?
        var expiration: String?
        var collapseID: String?
        /// One of these headers came more than once.
        var hasDuplicates = false

        init(_ headers: [HTTPField]) {
            var seen: UInt8 = 0
            for header in headers {
                guard let bit = PushRequestParser.singleValuedHeaderBit(header.name) else { continue }
                guard seen & bit == 0 else {
                    hasDuplicates = true
                    continue
                }
                seen |= bit
                switch bit {
                case Self.authorizationBit: authorization = header.value
                case Self.apnsIDBit: apnsID = header.value
                case Self.topicBit: topic = header.value
                case Self.pushTypeBit: pushType = header.value
                case Self.priorityBit: priority = header.value
                case Self.expirationBit: expiration = header.value
                default: collapseID = header.value
                }
            }
        }
    }

    /// Repeated headers and the `apns-id` format.
    static func checkHeaders(_ headers: KnownHeaders) throws(RejectionReason) {
        guard !headers.hasDuplicates else { throw .duplicateHeaders }
        if let apnsID = headers.apnsID, !isUUID(apnsID) { throw .badMessageId }
    }

    /// Every rule about topic, token, headers and payload (authentication is checked before this).
    static func parse(
        _ request: APNsProviderRequest, headers: KnownHeaders, tokenText: String
    ) throws(RejectionReason)
        -> ParsedPush
    {
        guard let topic = headers.topic else { throw .missingTopic }
        guard isValidTopic(topic) else { throw .badTopic }
        guard tokenText.utf8.count == 64, allBytes(of: tokenText, satisfy: isHexDigit) else { throw .badDeviceToken }

        var priority = 10
        if let text = headers.priority {
            guard let value = Int(text), value == 1 || value == 5 || value == 10 else { throw .badPriority }
            priority = value
        }
        var pushType = PushType.alert
        if let text = headers.pushType {
            guard let value = PushType(rawValue: text) else { throw .invalidPushType }
            pushType = value
        }
        var baseTopic = topic
        if let suffix = pushType.topicSuffix {
            guard topic.hasSuffix(suffix), topic.count > suffix.count else { throw .invalidPushType }
            baseTopic = String(topic.dropLast(suffix.count))
        }
        var expiration: Int64?
        if let text = headers.expiration {
            guard let value = Int64(text), value >= 0 else { throw .badExpirationDate }
            expiration = value
        }
        let collapseID = headers.collapseID
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
        let hasLineBreak = request.body.withUnsafeBytes { raw in
            raw.contains { $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\r") }
        }
        if hasLineBreak, text.contains(where: { $0 == "\n" || $0 == "\r" || $0 == "\r\n" }) {
            text = String(text.map { $0 == "\n" || $0 == "\r" || $0 == "\r\n" ? " " : $0 })
        }
        let isLowercase = allBytes(of: tokenText) { !($0 >= 0x41 && $0 <= 0x46) }
        return ParsedPush(
            deviceToken: isLowercase ? tokenText : tokenText.lowercased(), topic: topic, baseTopic: baseTopic,
            pushType: pushType, priority: priority, expiration: expiration, collapseID: collapseID, payloadJSON: text)
    }

    /// Whether every UTF-8 byte of `text` satisfies `predicate`, reading the bytes in place when the
    /// string is stored contiguously (always, for native strings).
    @inline(__always)
    static func allBytes(of text: String, satisfy predicate: (UInt8) -> Bool) -> Bool {
        if let result = text.utf8.withContiguousStorageIfAvailable({ $0.allSatisfy(predicate) }) {
            return result
        }
        return text.utf8.allSatisfy(predicate)
    }

    static func isUUID(_ text: String) -> Bool {
        guard text.utf8.count == 36 else { return false }
        var index = 0
        for byte in text.utf8 {
            switch index {
            case 8, 13, 18, 23: guard byte == UInt8(ascii: "-") else { return false }
            default: guard isHexDigit(byte) else { return false }
            }
            index += 1
        }
        return true
    }

    static func isValidTopic(_ topic: String) -> Bool {
        guard !topic.isEmpty, topic.utf8.count <= 255, !topic.hasPrefix("."), !topic.hasSuffix(".") else {
            return false
        }
        return allBytes(of: topic) { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        }
    }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x46) || (byte >= 0x61 && byte <= 0x66)
    }
}
