import JSONText

/// Spans written as an OTLP/HTTP `ExportTraceServiceRequest` in OTLP's JSON encoding (the protobuf message mapped
/// to JSON, with the ids as lowercase hex and 64-bit numbers as decimal strings, as the OTLP specification
/// requires), which collectors accept on `/v1/traces` with `Content-Type: application/json`.
enum OTLPJSON {
    /// One request carrying `spans`, all from the resource named by `service` and `instance`.
    static func request(_ spans: [Span], service: String, instance: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256 + spans.count * 480)
        out += Array(#"{"resourceSpans":[{"resource":{"attributes":["#.utf8)
        attribute("service.name", string: service, to: &out)
        out.append(UInt8(ascii: ","))
        attribute("service.instance.id", string: instance, to: &out)
        out += Array(#"]},"scopeSpans":[{"scope":{"name":"signalfetch.mailboxd"},"spans":["#.utf8)
        for (index, span) in spans.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            write(span, to: &out)
        }
        out += Array("]}]}]}".utf8)
        return out
    }

    private static func write(_ span: Span, to out: inout [UInt8]) {
        out += Array(#"{"traceId":""#.utf8)
        out += Array(span.context.traceID.description.utf8)
        out += Array(#"","spanId":""#.utf8)
        out += Array(span.context.spanID.description.utf8)
        out.append(UInt8(ascii: "\""))
        if let parent = span.parent {
            out += Array(#","parentSpanId":""#.utf8)
            out += Array(parent.description.utf8)
            out.append(UInt8(ascii: "\""))
        }
        out += Array(#","name":"#.utf8)
        JSONText.appendQuoted(span.name, to: &out)
        out += Array(#","kind":\#(span.kind.rawValue),"startTimeUnixNano":"\#(span.start)","#.utf8)
        out += Array(#""endTimeUnixNano":"\#(span.end)","attributes":["#.utf8)
        for (index, attribute) in span.attributes.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            switch attribute.value {
            case .int(let value):
                out += Array(#"{"key":"\#(attribute.key.rawValue)","value":{"intValue":"\#(value)"}}"#.utf8)
            case .bool(let value):
                out += Array(#"{"key":"\#(attribute.key.rawValue)","value":{"boolValue":\#(value)}}"#.utf8)
            case .string(let value):
                Self.attribute(attribute.key.rawValue, string: value, to: &out)
            }
        }
        out += Array(#"],"links":["#.utf8)
        for (index, link) in span.links.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out += Array(#"{"traceId":"\#(link.traceID)","spanId":"\#(link.spanID)"}"#.utf8)
        }
        // STATUS_CODE_ERROR is 2; an unset status (0) is left out.
        out += Array((span.failed ? #"],"status":{"code":2}}"# : "]}").utf8)
    }

    private static func attribute(_ key: String, string value: String, to out: inout [UInt8]) {
        out += Array(#"{"key":"#.utf8)
        JSONText.appendQuoted(key, to: &out)
        out += Array(#","value":{"stringValue":"#.utf8)
        JSONText.appendQuoted(value, to: &out)
        out += Array("}}".utf8)
    }
}
