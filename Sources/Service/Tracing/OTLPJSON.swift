import JSONText

/// Spans written as an OTLP/HTTP `ExportTraceServiceRequest` in OTLP's JSON encoding (the protobuf message mapped
/// to JSON, with the ids as lowercase hex and 64-bit numbers as decimal strings, as the OTLP specification
/// requires), which collectors accept on `/v1/traces` with `Content-Type: application/json`.
enum OTLPJSON {
    /// One request carrying `spans`, all from the resource named by `service` and `instance`.
    static func request(_ spans: [Span], service: String, instance: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256 + spans.count * 512)
        out.append(contentsOf: #"{"resourceSpans":[{"resource":{"attributes":["#.utf8)
        attribute("service.name", string: service, to: &out)
        out.append(UInt8(ascii: ","))
        attribute("service.instance.id", string: instance, to: &out)
        out.append(contentsOf: #"]},"scopeSpans":[{"scope":{"name":"signalfetch.mailboxd"},"spans":["#.utf8)
        for (index, span) in spans.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            write(span, to: &out)
        }
        out.append(contentsOf: "]}]}]}".utf8)
        return out
    }

    private static func write(_ span: Span, to out: inout [UInt8]) {
        out.append(contentsOf: #"{"traceId":""#.utf8)
        span.context.traceID.appendHex(to: &out)
        out.append(contentsOf: #"","spanId":""#.utf8)
        span.context.spanID.appendHex(to: &out)
        out.append(UInt8(ascii: "\""))
        if let parent = span.parent {
            out.append(contentsOf: #","parentSpanId":""#.utf8)
            parent.appendHex(to: &out)
            out.append(UInt8(ascii: "\""))
        }
        out.append(contentsOf: #","name":"#.utf8)
        JSONText.appendQuoted(span.name, to: &out)
        out.append(contentsOf: #","kind":"#.utf8)
        decimal(UInt64(span.kind.rawValue), to: &out)
        out.append(contentsOf: #","startTimeUnixNano":""#.utf8)
        decimal(span.start, to: &out)
        out.append(contentsOf: #"","endTimeUnixNano":""#.utf8)
        decimal(span.end, to: &out)
        out.append(contentsOf: #"","attributes":["#.utf8)
        for (index, attribute) in span.attributes.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            switch attribute.value {
            case .int(let value):
                out.append(contentsOf: #"{"key":""#.utf8)
                out.append(contentsOf: attribute.key.rawValue.utf8)
                out.append(contentsOf: #"","value":{"intValue":""#.utf8)
                if value < 0 { out.append(UInt8(ascii: "-")) }
                decimal(value.magnitude, to: &out)
                out.append(contentsOf: #""}}"#.utf8)
            case .bool(let value):
                out.append(contentsOf: #"{"key":""#.utf8)
                out.append(contentsOf: attribute.key.rawValue.utf8)
                out.append(
                    contentsOf: (value ? #"","value":{"boolValue":true}}"# : #"","value":{"boolValue":false}}"#).utf8)
            case .string(let value):
                Self.attribute(attribute.key.rawValue, string: value, to: &out)
            }
        }
        out.append(contentsOf: #"],"links":["#.utf8)
        for (index, link) in span.links.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: #"{"traceId":""#.utf8)
            link.traceID.appendHex(to: &out)
            out.append(contentsOf: #"","spanId":""#.utf8)
            link.spanID.appendHex(to: &out)
            out.append(contentsOf: #""}"#.utf8)
        }
        // STATUS_CODE_ERROR is 2; an unset status (0) is left out.
        out.append(contentsOf: (span.failed ? #"],"status":{"code":2}}"# : "]}").utf8)
    }

    private static func attribute(_ key: String, string value: String, to out: inout [UInt8]) {
        out.append(contentsOf: #"{"key":"#.utf8)
        JSONText.appendQuoted(key, to: &out)
        out.append(contentsOf: #","value":{"stringValue":"#.utf8)
        JSONText.appendQuoted(value, to: &out)
        out.append(contentsOf: "}}".utf8)
    }

    private static func decimal(_ value: UInt64, to out: inout [UInt8]) {
        // Digits written from the end of a buffer of 20 (UInt64's most), then appended once.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var rest = value
            var start = 20
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            } while rest > 0
            out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start...]))
        }
    }
}
