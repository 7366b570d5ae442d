import CGMime

extension MIMEMessage {
    /// An RFC 5322 message (CRLF line ends, 7-bit safe: non-ASCII headers RFC 2047 encoded, the body
    /// quoted-printable or base64 as GMime judges best) for a delivery that arrived as fields rather than as a
    /// message: `POST /v1/deliveries` stores the same shape as mail from an MTA.
    public static func compose(
        from: String, to: String, subject: String, body: String, date: Double, messageID: String
    ) -> [UInt8] {
        precondition(gmimeInitialised)
        let message = g_mime_message_new(1)!
        defer { g_object_unref(message) }
        let parsed = internet_address_list_parse(nil, from)
        defer { if let parsed { g_object_unref(parsed) } }
        if let parsed, internet_address_list_length(parsed) > 0 {
            internet_address_list_append(g_mime_message_get_from(message), parsed)
        } else {
            g_mime_message_add_mailbox(message, GMIME_ADDRESS_TYPE_FROM, nil, from)
        }
        g_mime_message_add_mailbox(message, GMIME_ADDRESS_TYPE_TO, nil, to)
        g_mime_message_set_subject(message, subject, "utf-8")
        if let when = g_date_time_new_from_unix_utc(gint64(date)) {
            g_mime_message_set_date(message, when)
            g_date_time_unref(when)
        }
        g_mime_message_set_message_id(message, messageID)
        // The body as UTF-8, in the transfer encoding GMime judges best for 7-bit transport.
        let part = g_mime_text_part_new_with_subtype("plain")!
        defer { g_object_unref(part) }
        let partObject = UnsafeMutablePointer<GMimeObject>(OpaquePointer(part))
        let mimePart = UnsafeMutablePointer<GMimePart>(OpaquePointer(part))
        g_mime_object_set_content_type_parameter(partObject, "charset", "utf-8")
        let content = Array(body.utf8)
        let source = content.withUnsafeBufferPointer { buffer in
            buffer.baseAddress.map {
                g_mime_stream_mem_new_with_buffer(
                    UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self), buffer.count)
            } ?? g_mime_stream_mem_new()
        }!
        defer { g_object_unref(source) }
        let wrapper = g_mime_data_wrapper_new_with_stream(source, GMIME_CONTENT_ENCODING_DEFAULT)!
        defer { g_object_unref(wrapper) }
        g_mime_part_set_content(mimePart, wrapper)
        g_mime_part_set_content_encoding(
            mimePart, g_mime_part_get_best_content_encoding(mimePart, GMIME_ENCODING_CONSTRAINT_7BIT))
        g_mime_message_set_mime_part(message, partObject)
        let object = UnsafeMutablePointer<GMimeObject>(OpaquePointer(message))
        let options = g_mime_format_options_new()
        defer { g_mime_format_options_free(options) }
        g_mime_format_options_set_newline_format(options, GMIME_NEWLINE_FORMAT_DOS)
        let stream = g_mime_stream_mem_new()!
        defer { g_object_unref(stream) }
        _ = g_mime_object_write_to_stream(object, options, stream)
        let memory = UnsafeMutablePointer<GMimeStreamMem>(OpaquePointer(stream))
        guard let array = g_mime_stream_mem_get_byte_array(memory), let data = array.pointee.data else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: Int(array.pointee.len)))
    }
}
