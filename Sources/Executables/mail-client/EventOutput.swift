import Foundation
import JSONText

/// A field's value in an event line (mail-client's output); arbitrary JSON from a simulator comes as `.raw`.
enum EventField: Sendable {
    case string(String)
    case int(Int)
    case bool(Bool)
    case null
    /// Already-serialized JSON.
    case raw(String)

    var serialized: String {
        switch self {
        case .string(let text): EventField.quote(text)
        case .int(let number): String(number)
        case .bool(let flag): flag ? "true" : "false"
        case .null: "null"
        case .raw(let json): json
        }
    }

    static func quote(_ text: String) -> String { JSONText.quoted(text) }

    /// A JSON value written compactly, object keys sorted.
    static func object(_ value: JSONValue) -> EventField { .raw(value.json) }
}

/// Writes one JSON object per line on standard output, `"event"` first. Lines from concurrent tasks never mix.
enum EventOutput {
    private static let lock = NSLock()

    /// The simulated device the current task works for, when one process runs many (`mail-client fleet`): its
    /// lines carry it as `"device"`, second after `"event"`.
    @TaskLocal static var device: String?

    static func emit(_ event: String, _ fields: [(String, EventField)] = []) {
        let tag = device.map { [("device", EventField.string($0))] } ?? []
        let body = ([("event", EventField.string(event))] + tag + fields)
            .map { "\(EventField.quote($0.0)):\($0.1.serialized)" }
            .joined(separator: ",")
        writeLine("{" + body + "}")
    }

    static func error(_ code: String, _ message: String, _ extra: [(String, EventField)] = []) {
        emit("error", [("code", .string(code)), ("message", .string(message))] + extra)
    }

    static func writeLine(_ line: String) {
        lock.withLock { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
    }
}
