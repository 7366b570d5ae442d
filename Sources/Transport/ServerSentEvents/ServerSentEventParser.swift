import Foundation

/// An incremental parser for `text/event-stream` bodies, following the HTML standard's rules.
///
/// Feed it bytes in any chunking; it returns the events completed by each chunk. Lines may end with
/// CRLF, LF or CR; lines starting with `:` are comments; multi-line `data:` fields are joined with `"\n"`;
/// an event without data is not dispatched.
public struct ServerSentEventParser: Sendable {
    private var line: [UInt8] = []
    private var lastByteWasCR = false
    private var atStreamStart = true
    private var eventType = ""
    private var data = ""
    private var hasData = false
    private var retry: Int?

    /// The last event ID seen on the stream, as a client would send it in `Last-Event-ID` when reconnecting.
    public private(set) var lastEventID: String?

    /// Creates a parser at the start of a stream.
    public init() {}

    /// Parses `chunk` and returns the events it completes, in order.
    public mutating func feed(_ chunk: Data) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in chunk {
            if lastByteWasCR {
                lastByteWasCR = false
                if byte == 0x0A { continue }  // the LF of a CRLF pair
            }
            switch byte {
            case 0x0D:
                lastByteWasCR = true
                processLine(into: &events)
            case 0x0A:
                processLine(into: &events)
            default:
                line.append(byte)
            }
        }
        return events
    }

    private mutating func processLine(into events: inout [ServerSentEvent]) {
        defer { line.removeAll(keepingCapacity: true) }
        if atStreamStart {
            atStreamStart = false
            if line.starts(with: [0xEF, 0xBB, 0xBF]) { line.removeFirst(3) }
        }
        if line.isEmpty {
            dispatch(into: &events)
            return
        }
        if line.first == UInt8(ascii: ":") { return }
        let field: String
        var value: Substring
        if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
            field = String(decoding: line[..<colon], as: UTF8.self)
            value = Substring(String(decoding: line[(colon + 1)...], as: UTF8.self))
            if value.first == " " { value.removeFirst() }
        } else {
            field = String(decoding: line, as: UTF8.self)
            value = ""
        }
        switch field {
        case "event":
            eventType = String(value)
        case "data":
            if hasData { data += "\n" }
            data += value
            hasData = true
        case "id":
            if !value.contains("\0") { lastEventID = String(value) }
        case "retry":
            if !value.isEmpty, value.allSatisfy({ $0.isASCII && $0.isNumber }) { retry = Int(value) }
        default:
            break
        }
    }

    private mutating func dispatch(into events: inout [ServerSentEvent]) {
        defer {
            eventType = ""
            data = ""
            hasData = false
            retry = nil
        }
        guard hasData else { return }
        events.append(
            ServerSentEvent(
                event: eventType.isEmpty ? "message" : eventType, data: data, id: lastEventID, retry: retry))
    }
}
