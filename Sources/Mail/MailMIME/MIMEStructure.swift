import CGMime
import Foundation

/// A header field as it is in the message: its name, and its value from the octet after the colon to the line end
/// (folding kept, the terminating CRLF not).
public struct MIMEHeader: Sendable, Equatable {
    /// The field name, as written.
    public var name: String
    /// The raw value: everything after the colon, unfolding and decoding left to the reader.
    public var value: String

    /// Creates a header field.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// One node of a message's MIME tree, with what JMAP's `EmailBodyPart` (RFC 8621 §4.1.4) says of it.
public struct MIMEBodyPart: Sendable, Equatable {
    /// The leaf's position (`1`, `2.1`, …, as ``MailAttachment/partId`` names it); `nil` for a multipart.
    public var partID: String?
    /// `type/subtype`, lowercased.
    public var type: String
    /// The charset parameter; `us-ascii` for a `text/*` part that names none; `nil` for anything else without one.
    public var charset: String?
    /// The Content-Disposition value (`inline`, `attachment`), lowercased, when there is one.
    public var disposition: String?
    /// The file name (Content-Disposition's `filename`, else Content-Type's `name`), decoded.
    public var name: String?
    /// The Content-Id, without its angle brackets.
    public var cid: String?
    /// The Content-Language tags.
    public var language: [String]?
    /// The Content-Location.
    public var location: String?
    /// A leaf's size after its transfer encoding is undone; 0 for a multipart.
    public var size: Int
    /// The part's own header fields; for the root, the message's.
    public var headers: [MIMEHeader]
    /// A multipart's children, in order.
    public var subParts: [MIMEBodyPart]
    /// A `text/*` leaf's content as UTF-8 with LF line ends (converted from its charset).
    public var text: String?
    /// Whether the charset conversion of ``text`` met bytes it could not convert.
    public var isEncodingProblem = false

    /// Whether this is a multipart.
    public var isMultipart: Bool { type.hasPrefix("multipart/") }
}

extension MIMEMessage {
    /// The message's header fields and its MIME tree, within `limits` (a tree cut at a limit ends there), or `nil`
    /// when GMime could not make a message of `bytes`.
    public static func structure(
        _ bytes: [UInt8], limits: MIMELimits = MIMELimits()
    ) -> (headers: [MIMEHeader], root: MIMEBodyPart)? {
        withParsedMessage(bytes) { message -> (headers: [MIMEHeader], root: MIMEBodyPart)? in
            guard let message else { return nil }
            let headers = headerFields(UnsafeMutableRawPointer(message))
            guard let root = g_mime_message_get_mime_part(message) else {
                let empty = MIMEBodyPart(
                    partID: "1", type: "text/plain", charset: "us-ascii", size: 0, headers: headers, subParts: [],
                    text: "")
                return (headers, empty)
            }
            var visited = 0
            var tree = node(UnsafeMutableRawPointer(root), path: "", depth: 0, visited: &visited, limits: limits)
            tree.headers = headers
            return (headers, tree)
        }
    }

    /// A header value as text: unfolded, RFC 2047 encoded words decoded, surrounding white space trimmed.
    public static func decodedHeaderText(_ raw: String) -> String {
        precondition(gmimeInitialised)
        let unfolded = unfold(raw)
        guard let decoded = takeString(g_mime_utils_header_decode_text(nil, unfolded)) else { return unfolded }
        return oneLine(decoded)
    }

    /// A header value read as an address list (RFC 5322 §3.4, with RFC 2047 display names), groups flattened.
    public static func parsedAddresses(_ raw: String) -> [MailAddress] {
        if isBareAddress(raw) { return [MailAddress(name: "", address: raw)] }
        return libraryParsedAddresses(raw)
    }

    /// ``parsedAddresses(_:)`` through GMime whatever the text.
    package static func libraryParsedAddresses(_ raw: String) -> [MailAddress] {
        precondition(gmimeInitialised)
        guard let list = internet_address_list_parse(nil, unfold(raw)) else { return [] }
        defer { sf_g_object_unref(UnsafeMutableRawPointer(list)) }
        return addresses(list)
    }

    /// Whether `raw` is one bare addr-spec of dot-atoms (`first.last+tag@mail.example.com`, RFC 5322 §3.4.1): what
    /// a delivery's sender usually is, and what GMime reads back unchanged with no name, so it is not asked.
    static func isBareAddress(_ raw: String) -> Bool {
        var inDomain = false
        var previous: UInt8 = UInt8(ascii: ".")  // a leading dot is not a dot-atom
        for byte in raw.utf8 {
            switch byte {
            case UInt8(ascii: "@"):
                guard !inDomain, previous != UInt8(ascii: ".") else { return false }
                inDomain = true
                previous = UInt8(ascii: ".")  // nor is a domain's
                continue
            case UInt8(ascii: "."):
                guard previous != UInt8(ascii: ".") else { return false }
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"):
                break
            case UInt8(ascii: "_"), UInt8(ascii: "+"):
                guard !inDomain else { return false }  // the local part only
            default:
                return false
            }
            previous = byte
        }
        return inDomain && previous != UInt8(ascii: ".")
    }

    /// A header value read as a list of message ids (`<a@b> <c@d>`), without angle brackets.
    public static func parsedMessageIDs(_ raw: String) -> [String] {
        var ids: [String] = []
        var rest = Substring(unfold(raw))
        while let open = rest.firstIndex(of: "<") {
            let after = rest[rest.index(after: open)...]
            guard let close = after.firstIndex(of: ">") else { break }
            let id = after[..<close].filter { !$0.isWhitespace }
            if !id.isEmpty { ids.append(String(id)) }
            rest = after[after.index(after: close)...]
        }
        return ids
    }

    /// A folded value on one line: each CRLF or LF followed by white space is removed (RFC 5322 §2.2.3).
    static func unfold(_ raw: String) -> String {
        var result = ""
        result.reserveCapacity(raw.utf8.count)
        for scalar in raw.unicodeScalars where scalar != "\r" && scalar != "\n" { result.unicodeScalars.append(scalar) }
        return result
    }

    private static func headerFields(_ object: UnsafeMutableRawPointer) -> [MIMEHeader] {
        guard let list = g_mime_object_get_header_list(cast(object, to: GMimeObject.self)) else { return [] }
        var fields: [MIMEHeader] = []
        for index in 0..<max(0, g_mime_header_list_get_count(list)) {
            guard let header = g_mime_header_list_get_header_at(list, index),
                let name = string(g_mime_header_get_name(header))
            else { continue }
            var value = string(g_mime_header_get_raw_value(header)) ?? ""
            while value.hasSuffix("\n") || value.hasSuffix("\r") || value.hasSuffix("\r\n") { value.removeLast() }
            fields.append(MIMEHeader(name: name, value: value))
        }
        return fields
    }

    private static func node(
        _ raw: UnsafeMutableRawPointer, path: String, depth: Int, visited: inout Int, limits: MIMELimits
    ) -> MIMEBodyPart {
        let object = cast(raw, to: GMimeObject.self)
        visited += 1
        let type = mediaType(object)
        var part = MIMEBodyPart(
            partID: nil, type: type,
            charset: string(g_mime_object_get_content_type_parameter(object, "charset"))?.lowercased(),
            disposition: string(g_mime_object_get_disposition(object))?.lowercased(), name: filename(object),
            cid: string(g_mime_object_get_content_id(object)), size: 0, headers: headerFields(raw), subParts: [])
        if let language = string(g_mime_object_get_header(object, "Content-Language")) {
            part.language = unfold(language).split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }
        }
        part.location = string(g_mime_object_get_header(object, "Content-Location")).map {
            unfold($0).trimmingCharacters(in: .whitespaces)
        }
        if sf_gmime_is_multipart(object) != 0 {
            let multipart = cast(raw, to: GMimeMultipart.self)
            for index in 0..<max(0, g_mime_multipart_get_count(multipart)) {
                guard visited < limits.maxParts, depth < limits.maxDepth,
                    let child = g_mime_multipart_get_part(multipart, index)
                else { break }
                let childPath = path.isEmpty ? String(index + 1) : "\(path).\(index + 1)"
                part.subParts.append(
                    node(
                        UnsafeMutableRawPointer(child), path: childPath, depth: depth + 1, visited: &visited,
                        limits: limits))
            }
            return part
        }
        part.partID = path.isEmpty ? "1" : path
        part.size = decodedContent(object).count
        if type.hasPrefix("text/") {
            if part.charset == nil { part.charset = "us-ascii" }
            if sf_gmime_is_text_part(object) != 0 {
                part.text = takeLFString(g_mime_text_part_get_text(cast(raw, to: GMimeTextPart.self)))
                part.isEncodingProblem = part.text?.contains("\u{FFFD}") ?? false
            }
        }
        return part
    }
}
