import JSONText
import MailMIME
import MailboxStore

extension MessageSource {
    /// The message's RFC 5322 bytes: as they arrived, or composed from a delivery's fields (the same bytes each
    /// time). The `/v1` raw and part downloads and JMAP's Email parse and blobs all read it.
    package var rfc5322: [UInt8] {
        switch self {
        case .stored(let bytes): bytes
        case .fields(let fields):
            MIMEMessage.compose(
                from: fields.from, to: fields.to, subject: fields.subject, body: fields.body, date: fields.sentAt,
                messageID: fields.messageID)
        }
    }
}

/// A `header:{name}[:as{Form}][:all]` property (RFC 8621 §4.1.2–4.1.3).
struct HeaderProperty: Equatable {
    enum Form: String {
        case raw = "asRaw"
        case text = "asText"
        case addresses = "asAddresses"
        case messageIDs = "asMessageIds"
        case urls = "asURLs"
    }

    var name: String
    var form: Form
    var all: Bool

    init?(_ property: String) {
        var parts = property.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 2, parts.count <= 4, parts[0] == "header", !parts[1].isEmpty,
            parts[1].utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { return nil }
        name = parts[1]
        parts.removeFirst(2)
        all = parts.last == "all"
        if all { parts.removeLast() }
        if let form = parts.first {
            guard parts.count == 1, let known = Form(rawValue: form) else { return nil }
            self.form = known
        } else {
            guard parts.isEmpty else { return nil }
            form = .raw
        }
    }

    func value(in headers: [MIMEHeader]) -> JSONValue {
        let values = headers.filter { $0.name.lowercased() == name.lowercased() }.map { convert($0.value) }
        if all { return .array(values) }
        return values.last ?? .null
    }

    private func convert(_ raw: String) -> JSONValue {
        switch form {
        case .raw: return .string(raw)
        case .text: return .string(MIMEMessage.decodedHeaderText(raw))
        case .addresses: return EmailObject.addresses(MIMEMessage.parsedAddresses(raw))
        case .messageIDs:
            let ids = MIMEMessage.parsedMessageIDs(raw)
            return ids.isEmpty ? .null : .strings(ids)
        case .urls:
            let urls = MIMEMessage.parsedMessageIDs(raw)
            return urls.isEmpty ? .null : .strings(urls)
        }
    }
}

/// The EmailBodyPart properties (RFC 8621 §4.1.4).
enum BodyPartProperty {
    static let defaults = [
        "partId", "blobId", "size", "name", "type", "charset", "disposition", "cid", "language", "location",
    ]
    static let known = Set(defaults + ["headers", "subParts"])
}

/// Which body values an Email/get returns, and how long.
struct BodyValueOptions {
    var text: Bool
    var html: Bool
    var all: Bool
    /// 0: whole.
    var maxBytes: Int
}

/// A message's MIME form as JMAP reads it: its headers, its tree, and the text, HTML and attachment lists the
/// RFC's algorithm makes of the tree.
struct ParsedEmail {
    var headers: [MIMEHeader]
    var root: MIMEBodyPart
    var textBody: [MIMEBodyPart] = []
    var htmlBody: [MIMEBodyPart] = []
    var attachments: [MIMEBodyPart] = []

    init?(_ source: MessageSource) {
        guard let structure = MIMEMessage.structure(source.rfc5322) else { return nil }
        headers = structure.headers
        root = structure.root
        let text = PartList()
        let html = PartList()
        let attachments = PartList()
        Self.parseStructure(
            [root], multipartType: "mixed", inAlternative: false, html: html, text: text, attachments: attachments)
        textBody = text.parts
        htmlBody = html.parts
        self.attachments = attachments.parts
    }

    /// A list the algorithm shares between its levels, as the RFC's JavaScript shares its arrays.
    final class PartList {
        var parts: [MIMEBodyPart] = []
    }

    static func isInlineMediaType(_ type: String) -> Bool {
        type.hasPrefix("image/") || type.hasPrefix("audio/") || type.hasPrefix("video/")
    }

    /// RFC 8621 §4.1.4's `parseStructure`, as the RFC writes it: a `nil` list is one this branch of an
    /// alternative no longer adds to.
    static func parseStructure(
        _ parts: [MIMEBodyPart], multipartType: String, inAlternative: Bool, html: PartList?, text: PartList?,
        attachments: PartList
    ) {
        var text = text
        var html = html
        let textLength = text?.parts.count ?? -1
        let htmlLength = html?.parts.count ?? -1
        for (index, part) in parts.enumerated() {
            let isInline =
                part.disposition != "attachment"
                && (part.type == "text/plain" || part.type == "text/html" || isInlineMediaType(part.type))
                && (index == 0 || (multipartType != "related" && (isInlineMediaType(part.type) || part.name == nil)))
            if part.isMultipart {
                let subType = String(part.type.dropFirst("multipart/".count))
                parseStructure(
                    part.subParts, multipartType: subType, inAlternative: inAlternative || subType == "alternative",
                    html: html, text: text, attachments: attachments)
            } else if isInline {
                if multipartType == "alternative" {
                    switch part.type {
                    case "text/plain": text?.parts.append(part)
                    case "text/html": html?.parts.append(part)
                    default: attachments.parts.append(part)
                    }
                    continue
                } else if inAlternative {
                    if part.type == "text/plain" { html = nil }
                    if part.type == "text/html" { text = nil }
                }
                text?.parts.append(part)
                html?.parts.append(part)
                if (text == nil || html == nil) && isInlineMediaType(part.type) { attachments.parts.append(part) }
            } else {
                attachments.parts.append(part)
            }
        }
        if multipartType == "alternative", let text, let html {
            // Only HTML found: the text body is the HTML; only text found: the reverse.
            if textLength == text.parts.count && htmlLength != html.parts.count {
                text.parts.append(contentsOf: html.parts[max(0, htmlLength)...])
            }
            if htmlLength == html.parts.count && textLength != text.parts.count {
                html.parts.append(contentsOf: text.parts[max(0, textLength)...])
            }
        }
    }
}

/// One Email object (RFC 8621 §4.1) from the stored record and, for the properties that need it, its MIME form.
struct EmailObject {
    let record: MessageRecord
    let parsed: ParsedEmail?

    static func address(_ address: MailAddress) -> JSONValue {
        ["name": address.name.isEmpty ? .null : .string(address.name), "email": .string(address.address)]
    }

    static func addresses(_ list: [MailAddress]) -> JSONValue {
        list.isEmpty ? .null : .array(list.map(address))
    }

    /// The stored sender (`Name <address>` or a bare address) as an EmailAddress list.
    static func sender(_ text: String) -> JSONValue {
        let parsed = MIMEMessage.parsedAddresses(text)
        if !parsed.isEmpty { return addresses(parsed) }
        return text.isEmpty ? .null : [["name": .null, "email": .string(text)]]
    }

    /// The blob id of a message's raw form (`M…`) or of one of its parts (`P…_2_1`).
    static func blobID(message: String) -> String { "M" + message }
    static func blobID(message: String, part: String) -> String {
        "P" + message + "_" + part.replacingOccurrences(of: ".", with: "_")
    }

    func json(properties: [String], bodyProperties: [String], values: BodyValueOptions) -> JSONValue {
        var object: [String: JSONValue] = Dictionary(minimumCapacity: properties.count + 1)
        object["id"] = .string(record.id)
        for property in properties {
            object[property] = value(of: property, bodyProperties: bodyProperties, values: values)
        }
        return .object(object)
    }

    private func value(of property: String, bodyProperties: [String], values: BodyValueOptions) -> JSONValue {
        switch property {
        case "id": return .string(record.id)
        case "blobId": return .string(Self.blobID(message: record.id))
        case "threadId": return .string(MethodContext.threadID(record.id))
        case "mailboxIds": return [record.mailbox.rawValue: true]
        case "keywords":
            var keywords: [String: JSONValue] = [:]
            if record.seen { keywords["$seen"] = true }
            if record.flagged { keywords["$flagged"] = true }
            for keyword in record.keywords { keywords[keyword] = true }
            return .object(keywords)
        case "size": return .int(record.size)
        case "receivedAt": return .string(JMAPDate.string(record.receivedAt))
        case "messageId": return record.messageID.map { .strings([$0]) } ?? .null
        case "inReplyTo": return record.inReplyTo.map { .strings([$0]) } ?? .null
        case "from": return Self.sender(record.from)
        case "to": return Self.addresses(record.recipients)
        case "cc": return Self.addresses(record.cc)
        case "subject": return .string(record.subject)
        case "sentAt": return record.sentAt.map { .string(JMAPDate.string($0)) } ?? .null
        case "hasAttachment": return .bool(record.hasAttachment)
        case "preview":
            // 256 bytes hold at most 256 characters: only a longer preview is counted.
            return .string(record.preview.utf8.count <= 256 ? record.preview : String(record.preview.prefix(256)))
        default: break
        }
        guard let parsed else { return .null }
        switch property {
        case "references": return HeaderProperty("header:References:asMessageIds")!.value(in: parsed.headers)
        case "sender": return HeaderProperty("header:Sender:asAddresses")!.value(in: parsed.headers)
        case "bcc": return HeaderProperty("header:Bcc:asAddresses")!.value(in: parsed.headers)
        case "replyTo": return HeaderProperty("header:Reply-To:asAddresses")!.value(in: parsed.headers)
        case "headers": return Self.headers(parsed.headers)
        case "bodyStructure": return part(parsed.root, bodyProperties, structure: true)
        case "textBody": return .array(parsed.textBody.map { part($0, bodyProperties, structure: false) })
        case "htmlBody": return .array(parsed.htmlBody.map { part($0, bodyProperties, structure: false) })
        case "attachments": return .array(parsed.attachments.map { part($0, bodyProperties, structure: false) })
        case "bodyValues": return bodyValues(parsed, values)
        default: return HeaderProperty(property)?.value(in: parsed.headers) ?? .null
        }
    }

    static func headers(_ headers: [MIMEHeader]) -> JSONValue {
        .array(headers.map { ["name": .string($0.name), "value": .string($0.value)] })
    }

    private func part(_ part: MIMEBodyPart, _ properties: [String], structure: Bool) -> JSONValue {
        var object: [String: JSONValue] = Dictionary(minimumCapacity: properties.count + 1)
        for property in properties {
            switch property {
            case "partId": object[property] = .string(part.partID)
            case "blobId": object[property] = .string(part.partID.map { Self.blobID(message: record.id, part: $0) })
            case "size": object[property] = .int(part.size)
            case "headers": object[property] = Self.headers(part.headers)
            case "name": object[property] = .string(part.name)
            case "type": object[property] = .string(part.type)
            case "charset": object[property] = .string(part.charset)
            case "disposition": object[property] = .string(part.disposition)
            case "cid": object[property] = .string(part.cid)
            case "language": object[property] = part.language.map(JSONValue.strings) ?? .null
            case "location": object[property] = .string(part.location)
            case "subParts":
                object[property] =
                    part.isMultipart
                    ? .array(part.subParts.map { self.part($0, properties, structure: structure) }) : .null
            default: object[property] = HeaderProperty(property)?.value(in: part.headers) ?? .null
            }
        }
        if structure, part.isMultipart, object["subParts"] == nil {
            object["subParts"] = .array(part.subParts.map { self.part($0, properties, structure: true) })
        }
        return .object(object)
    }

    private func bodyValues(_ parsed: ParsedEmail, _ options: BodyValueOptions) -> JSONValue {
        var parts: [MIMEBodyPart] = []
        if options.text || options.all { parts += parsed.textBody }
        if options.html || options.all { parts += parsed.htmlBody }
        if options.all { parts += Self.leaves(parsed.root) }
        var values: [String: JSONValue] = [:]
        for part in parts {
            guard let id = part.partID, values[id] == nil, part.type.hasPrefix("text/"), let text = part.text else {
                continue
            }
            let (value, truncated) = Self.truncated(text, to: options.maxBytes)
            values[id] = [
                "value": .string(value), "isEncodingProblem": .bool(part.isEncodingProblem),
                "isTruncated": .bool(truncated),
            ]
        }
        return .object(values)
    }

    static func leaves(_ part: MIMEBodyPart) -> [MIMEBodyPart] {
        part.isMultipart ? part.subParts.flatMap(leaves) : [part]
    }

    /// At most `maxBytes` of UTF-8 (0: all), cut between characters.
    static func truncated(_ text: String, to maxBytes: Int) -> (String, Bool) {
        guard maxBytes > 0, text.utf8.count > maxBytes else { return (text, false) }
        var result = ""
        var bytes = 0
        for character in text {
            bytes += character.utf8.count
            if bytes > maxBytes { break }
            result.append(character)
        }
        return (result, true)
    }
}
