import CGMime
import Foundation

/// GMime is initialised once per process, on first use.
let gmimeInitialised: Bool = {
    g_mime_init()
    return true
}()

/// A GObject reference released at the end of a scope.
struct Owned: ~Copyable {
    let pointer: UnsafeMutableRawPointer
    init?(_ pointer: UnsafeMutableRawPointer?) {
        guard let pointer else { return nil }
        self.pointer = pointer
    }
    deinit { sf_g_object_unref(pointer) }
}

/// Typed views of GMime's objects: GObject casts go through `OpaquePointer`.
func cast<T>(_ pointer: UnsafeMutableRawPointer, to: T.Type) -> UnsafeMutablePointer<T> {
    UnsafeMutablePointer<T>(OpaquePointer(pointer))
}

func string(_ text: UnsafePointer<CChar>?) -> String? {
    text.map { String(cString: $0) }
}

/// Takes a string GMime allocated, freeing it.
func takeString(_ text: UnsafeMutablePointer<CChar>?) -> String? {
    guard let text else { return nil }
    defer { g_free(text) }
    return String(cString: text)
}

/// A C string with its CRLF line ends made LF (the line ends clients expect), converted byte by byte: going
/// through Foundation's `replacingOccurrences` cost more than the whole parse.
private func lfString(_ text: UnsafePointer<CChar>) -> String {
    let length = strlen(text)
    return text.withMemoryRebound(to: UInt8.self, capacity: length) { start in
        let bytes = UnsafeBufferPointer(start: start, count: length)
        guard bytes.contains(0x0D) else { return String(decoding: bytes, as: UTF8.self) }
        var out: [UInt8] = []
        out.reserveCapacity(length)
        for index in 0..<length where !(bytes[index] == 0x0D && index + 1 < length && bytes[index + 1] == 0x0A) {
            out.append(bytes[index])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// ``lfString(_:)`` of a string GMime allocated, freeing it.
func takeLFString(_ text: UnsafeMutablePointer<CChar>?) -> String? {
    guard let text else { return nil }
    defer { g_free(text) }
    return lfString(text)
}

extension MIMEMessage {
    /// Parses an RFC 5322 message (with MIME structure) from its raw bytes.
    public static func parse(_ bytes: [UInt8], limits: MIMELimits = MIMELimits()) -> MIMEMessage {
        withParsedMessage(bytes) { message in
            guard let message else { return fallback(bytes) }
            return describe(message, limits: limits)
        }
    }

    /// The decoded content of the part at `partID` (as ``MailAttachment/partId`` names it), or `nil` when the
    /// message has no such part.
    public static func part(
        _ partID: String, of bytes: [UInt8], limits: MIMELimits = MIMELimits()
    ) -> MIMEPartContent? {
        withParsedMessage(bytes) { message -> MIMEPartContent? in
            guard let message, let root = g_mime_message_get_mime_part(message) else { return nil }
            var found: MIMEPartContent?
            var walker = Walker(limits: limits)
            walker.walk(UnsafeMutableRawPointer(root), path: "", depth: 0) { object, path in
                guard path == partID else { return true }
                found = MIMEPartContent(
                    contentType: mediaType(object), filename: filename(object), bytes: decodedContent(object),
                    charset: string(g_mime_object_get_content_type_parameter(object, "charset")))
                return false
            }
            return found
        }
    }

    /// Runs `body` with the message GMime built from `bytes` (`nil` when it could not build one).
    static func withParsedMessage<T>(
        _ bytes: [UInt8], _ body: (UnsafeMutablePointer<GMimeMessage>?) -> T
    ) -> T {
        precondition(gmimeInitialised)
        let stream = bytes.withUnsafeBufferPointer { buffer in
            buffer.baseAddress.map {
                g_mime_stream_mem_new_with_buffer(
                    UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self), buffer.count)
            } ?? g_mime_stream_mem_new()
        }
        guard let stream = Owned(UnsafeMutableRawPointer(stream)),
            let parser = Owned(
                UnsafeMutableRawPointer(g_mime_parser_new_with_stream(cast(stream.pointer, to: GMimeStream.self))))
        else { return body(nil) }
        let options = g_mime_parser_options_new()
        defer { g_mime_parser_options_free(options) }
        g_mime_parser_options_set_rfc2047_compliance_mode(options, GMIME_RFC_COMPLIANCE_LOOSE)
        g_mime_parser_options_set_address_compliance_mode(options, GMIME_RFC_COMPLIANCE_LOOSE)
        g_mime_parser_options_set_parameter_compliance_mode(options, GMIME_RFC_COMPLIANCE_LOOSE)
        g_mime_parser_options_set_allow_addresses_without_domain(options, 1)
        // Undeclared 8-bit header text: UTF-8 when it is valid, else the Western charset most such mail uses.
        withFallbackCharsets(["UTF-8", "windows-1252"]) { g_mime_parser_options_set_fallback_charsets(options, $0) }
        let message = g_mime_parser_construct_message(cast(parser.pointer, to: GMimeParser.self), options)
        guard let message else { return body(nil) }
        let owned = Owned(UnsafeMutableRawPointer(message))
        defer { withExtendedLifetime(owned) {} }
        return body(message)
    }

    private static func withFallbackCharsets(
        _ names: [String], _ body: (UnsafeMutablePointer<UnsafePointer<CChar>?>) -> Void
    ) {
        let copies = names.map { strdup($0) }
        defer { copies.forEach { free($0) } }
        var pointers: [UnsafePointer<CChar>?] = copies.map { UnsafePointer($0) } + [nil]
        pointers.withUnsafeMutableBufferPointer { body($0.baseAddress!) }
    }

    /// What could be read of bytes GMime could not make a message of: the text after the header block.
    private static func fallback(_ bytes: [UInt8]) -> MIMEMessage {
        var message = MIMEMessage()
        message.isComplete = false
        var index = 0
        while index + 1 < bytes.count {
            if bytes[index] == 0x0A,
                bytes[index + 1] == 0x0A
                    || (bytes[index + 1] == 0x0D && index + 2 < bytes.count && bytes[index + 2] == 0x0A)
            {
                break
            }
            index += 1
        }
        message.text =
            String(decoding: bytes[min(index, bytes.count)...], as: UTF8.self)
            .trimmingPrefix { $0.isNewline }.description
        return message
    }

    private static func describe(_ message: UnsafeMutablePointer<GMimeMessage>, limits: MIMELimits) -> MIMEMessage {
        var result = MIMEMessage()
        result.subject = string(g_mime_message_get_subject(message)).map(Self.oneLine) ?? ""
        result.from = addresses(g_mime_message_get_from(message))
        result.to = addresses(g_mime_message_get_to(message))
        result.cc = addresses(g_mime_message_get_cc(message))
        if let date = g_mime_message_get_date(message) {
            result.sentAt = Double(g_date_time_to_unix(date))
        }
        result.messageID = string(g_mime_message_get_message_id(message)).flatMap(Self.bareID)
        let object = cast(UnsafeMutableRawPointer(message), to: GMimeObject.self)
        result.inReplyTo = string(g_mime_object_get_header(object, "In-Reply-To")).flatMap(Self.bareID)
        guard let root = g_mime_message_get_mime_part(message) else { return result }
        var walker = Walker(limits: limits)
        walker.walk(UnsafeMutableRawPointer(root), path: "", depth: 0) { part, path in
            let type = mediaType(part)
            let disposition = string(g_mime_object_get_disposition(part))?.lowercased()
            let isAttachment = disposition == "attachment"
            if !isAttachment, sf_gmime_is_text_part(part) != 0, type == "text/plain" || type == "text/html" {
                let text = takeLFString(
                    g_mime_text_part_get_text(cast(UnsafeMutableRawPointer(part), to: GMimeTextPart.self)))
                if type == "text/plain", result.text.isEmpty, let text {
                    result.text = text
                    return true
                }
                if type == "text/html", result.html == nil, let text {
                    result.html = text
                    return true
                }
            }
            result.attachments.append(
                MailAttachment(partId: path, filename: filename(part), type: type, size: decodedContent(part).count))
            return true
        }
        if result.text.isEmpty, let html = result.html { result.text = HTMLText.reduce(html) }
        // A multipart whose boundary is missing or never used holds everything in its prologue.
        if result.text.isEmpty, result.html == nil, result.attachments.isEmpty, sf_gmime_is_multipart(root) != 0,
            let prologue = g_mime_multipart_get_prologue(cast(UnsafeMutableRawPointer(root), to: GMimeMultipart.self))
        {
            result.text = lfString(prologue)
            walker.limitReached = true
        }
        result.isComplete = !walker.limitReached
        return result
    }

    /// A header value for display: each run of spaces, tabs and control characters (folding left some) as one
    /// space, none at the ends.
    static func oneLine(_ text: String) -> String {
        var result = ""
        var pendingSpace = false
        for scalar in text.unicodeScalars {
            if scalar.value <= 0x20 || scalar.value == 0x7F {
                pendingSpace = !result.isEmpty
            } else {
                if pendingSpace { result.append(" ") }
                pendingSpace = false
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// `<id@host>` → `id@host`: the first id in angle brackets (In-Reply-To may carry text around it, as in
    /// `Your message of … <id@host>`), or the first word when there are no brackets.
    static func bareID(_ text: String) -> String? {
        let isSpace = { (c: Character) in c == " " || c == "\t" || c == "\r" || c == "\n" }
        if let open = text.firstIndex(of: "<") {
            let id = text[text.index(after: open)...].prefix { $0 != ">" && !isSpace($0) }
            return id.isEmpty ? nil : String(id)
        }
        let id = text.drop(while: isSpace).prefix { !isSpace($0) }
        return id.isEmpty ? nil : String(id)
    }

    private static func addresses(_ list: OpaquePointer?) -> [MailAddress] {
        addresses(list.map { UnsafeMutablePointer<InternetAddressList>($0) })
    }

    static func addresses(_ list: UnsafeMutablePointer<InternetAddressList>?) -> [MailAddress] {
        guard let list else { return [] }
        var result: [MailAddress] = []
        for index in 0..<max(0, internet_address_list_length(list)) {
            guard let address = internet_address_list_get_address(list, index) else { continue }
            let raw = UnsafeMutableRawPointer(address)
            if sf_internet_address_is_mailbox(address) != 0 {
                let mailbox = cast(raw, to: InternetAddressMailbox.self)
                result.append(
                    MailAddress(
                        name: string(internet_address_get_name(address)).map(Self.oneLine) ?? "",
                        address: string(internet_address_mailbox_get_addr(mailbox)) ?? ""))
            } else if sf_internet_address_is_group(address) != 0 {
                result += addresses(internet_address_group_get_members(cast(raw, to: InternetAddressGroup.self)))
            }
        }
        return result
    }

    /// `type/subtype`, lowercased.
    static func mediaType(_ object: UnsafeMutablePointer<GMimeObject>) -> String {
        guard let type = g_mime_object_get_content_type(object) else { return "application/octet-stream" }
        return takeString(g_mime_content_type_get_mime_type(type))?.lowercased() ?? "application/octet-stream"
    }

    static func filename(_ object: UnsafeMutablePointer<GMimeObject>) -> String? {
        if sf_gmime_is_part(object) != 0 {
            return string(g_mime_part_get_filename(cast(UnsafeMutableRawPointer(object), to: GMimePart.self)))
        }
        return string(g_mime_object_get_content_disposition_parameter(object, "filename"))
            ?? string(g_mime_object_get_content_type_parameter(object, "name"))
    }

    /// A leaf's content with its transfer encoding undone; an attached message's bytes as they are.
    static func decodedContent(_ object: UnsafeMutablePointer<GMimeObject>) -> [UInt8] {
        guard let sink = Owned(UnsafeMutableRawPointer(g_mime_stream_mem_new())) else { return [] }
        let stream = cast(sink.pointer, to: GMimeStream.self)
        let raw = UnsafeMutableRawPointer(object)
        if sf_gmime_is_part(object) != 0 {
            guard let content = g_mime_part_get_content(cast(raw, to: GMimePart.self)) else { return [] }
            _ = g_mime_data_wrapper_write_to_stream(content, stream)
        } else if sf_gmime_is_message_part(object) != 0 {
            guard let inner = g_mime_message_part_get_message(cast(raw, to: GMimeMessagePart.self)) else { return [] }
            _ = g_mime_object_write_to_stream(cast(UnsafeMutableRawPointer(inner), to: GMimeObject.self), nil, stream)
        }
        guard let array = g_mime_stream_mem_get_byte_array(cast(sink.pointer, to: GMimeStreamMem.self)),
            let data = array.pointee.data
        else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: Int(array.pointee.len)))
    }
}

/// Walks a MIME tree depth first, naming each leaf by its IMAP-style path, within the limits.
private struct Walker {
    let limits: MIMELimits
    var visited = 0
    var limitReached = false

    init(limits: MIMELimits) { self.limits = limits }

    /// Calls `visit` for each leaf (a part or an attached message) until it returns false.
    @discardableResult
    mutating func walk(
        _ raw: UnsafeMutableRawPointer, path: String, depth: Int,
        _ visit: (UnsafeMutablePointer<GMimeObject>, String) -> Bool
    ) -> Bool {
        let object = UnsafeMutablePointer<GMimeObject>(OpaquePointer(raw))
        visited += 1
        guard visited <= limits.maxParts, depth <= limits.maxDepth else {
            limitReached = true
            return false
        }
        guard sf_gmime_is_multipart(object) != 0 else { return visit(object, path.isEmpty ? "1" : path) }
        let multipart = UnsafeMutablePointer<GMimeMultipart>(OpaquePointer(raw))
        for index in 0..<max(0, g_mime_multipart_get_count(multipart)) {
            guard let child = g_mime_multipart_get_part(multipart, index) else { continue }
            let childPath = path.isEmpty ? String(index + 1) : "\(path).\(index + 1)"
            guard walk(UnsafeMutableRawPointer(child), path: childPath, depth: depth + 1, visit) else { return false }
        }
        return true
    }
}
