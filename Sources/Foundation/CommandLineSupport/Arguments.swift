import Foundation
import NetworkAddress

/// A command-line usage error: printed with the command's help, exit status 2.
public struct UsageError: Error, CustomStringConvertible, Sendable {
    /// What is wrong with the arguments.
    public let message: String
    /// Creates an error.
    public init(_ message: String) { self.message = message }
    /// The message.
    public var description: String { message }
}

/// Parsed `--flag value` / `--flag=value` / `--switch` arguments plus positionals, with environment fallbacks.
///
/// Every flag can also be set through an environment variable: the prefix (for example `MAILBOXD_`) and the
/// flag in upper snake case (`--data-dir` → `MAILBOXD_DATA_DIR`). A flag on the command line wins.
public struct Arguments: Sendable {
    /// Positional arguments, in order.
    public private(set) var positionals: [String] = []
    private var values: [String: [String]] = [:]
    private var switches: Set<String> = []
    private let environmentPrefix: String
    private let environment: [String: String]
    private var consumed: Set<String> = []

    /// Parses `arguments` (without the program name). `switchNames` are flags that take no value.
    public init(
        _ arguments: [String], switches switchNames: Set<String> = [], environmentPrefix: String,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        self.environmentPrefix = environmentPrefix
        self.environment = environment
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("--"), argument.count > 2 else {
                positionals.append(argument)
                continue
            }
            var name = String(argument.dropFirst(2))
            var value: String?
            if let equals = name.firstIndex(of: "=") {
                value = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            if switchNames.contains(name) {
                if let value, !["true", "1", "yes"].contains(value.lowercased()) { continue }
                switches.insert(name)
                continue
            }
            if value == nil {
                guard index < arguments.count else { throw UsageError("--\(name) needs a value") }
                value = arguments[index]
                index += 1
            }
            values[name, default: []].append(value!)
        }
    }

    private func environmentName(_ flag: String) -> String {
        environmentPrefix + flag.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    /// Whether `--help` or `-h` was given.
    public var wantsHelp: Bool { switches.contains("help") || positionals.contains("-h") || values["help"] != nil }

    /// The value of `--name` (the last one given), else its environment variable, else `nil`.
    public func string(_ name: String) -> String? {
        if let value = values[name]?.last { return value }
        if let value = environment[environmentName(name)], !value.isEmpty { return value }
        return nil
    }

    /// The value of `--name`, else its environment variable, else `defaultValue`.
    public func string(_ name: String, default defaultValue: String) -> String { string(name) ?? defaultValue }

    /// The value of `--name`, which must be given.
    public func required(_ name: String) throws -> String {
        guard let value = string(name) else {
            throw UsageError("missing --\(name) (or \(environmentName(name)))")
        }
        return value
    }

    /// Every value given for a repeatable `--name` (the environment variable may hold a comma-separated list).
    public func all(_ name: String) -> [String] {
        if let given = values[name] { return given }
        if let value = environment[environmentName(name)], !value.isEmpty {
            return value.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) }
        }
        return []
    }

    /// `--name` as an integer.
    public func int(_ name: String, default defaultValue: Int) throws -> Int {
        guard let text = string(name) else { return defaultValue }
        guard let value = Int(text) else { throw UsageError("--\(name) must be an integer, got '\(text)'") }
        return value
    }

    /// `--name` as a number.
    public func double(_ name: String, default defaultValue: Double) throws -> Double {
        guard let text = string(name) else { return defaultValue }
        guard let value = Double(text) else { throw UsageError("--\(name) must be a number, got '\(text)'") }
        return value
    }

    /// `--name` as a duration in seconds: a whole number with an optional unit, `s`, `m`, `h` or `d` (`90`,
    /// `15m`, `30d`), from 1 second up to `maximum`.
    public func seconds(
        _ name: String, default defaultValue: Double, maximum: Double = 10 * 365 * 86_400
    ) throws
        -> Double
    {
        guard let text = string(name) else { return defaultValue }
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        let unit = text.last.flatMap { units[$0] }
        let digits = unit == nil ? Substring(text) : text.dropLast()
        guard (1...9).contains(digits.count), digits.allSatisfy(\.isASCII), let count = Int(digits), count > 0,
            Double(count) * (unit ?? 1) <= maximum
        else {
            throw UsageError("--\(name) must be a duration such as 90s, 15m, 12h or 30d (at most \(Int(maximum))s)")
        }
        return Double(count) * (unit ?? 1)
    }

    /// Whether the switch `--name` was given (or its environment variable is `1`/`true`/`yes`).
    public func flag(_ name: String) -> Bool {
        if switches.contains(name) { return true }
        if let value = environment[environmentName(name)] { return ["1", "true", "yes"].contains(value.lowercased()) }
        return false
    }

    /// Flags given on the command line that are not in `known`: a typo should fail loudly.
    public func unknownFlags(known: Set<String>) -> [String] {
        (Set(values.keys).union(switches)).subtracting(known).subtracting(["help"]).sorted()
    }

    /// Throws a `UsageError` naming the first flag not in `known`.
    public func rejectUnknownFlags(known: Set<String>) throws {
        if let unknown = unknownFlags(known: known).first { throw UsageError("unknown option --\(unknown)") }
    }
}

/// A `host:port` pair as given on the command line.
public struct HostPort: Sendable, Equatable, CustomStringConvertible {
    /// The host name or address.
    public var host: String
    /// The port.
    public var port: UInt16

    /// `host` and `port`.
    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT` (`[v6]:PORT` for IPv6; an empty host is every address, port 0 picks one).
    public init(parsing text: String) throws {
        let parts: (host: Substring, port: Substring?)
        do {
            parts = try HostPortSyntax.split(Substring(text))
        } catch {
            throw UsageError("expected HOST:PORT, got '\(text)' (\(error))")
        }
        guard let portText = parts.port else { throw UsageError("expected HOST:PORT, got '\(text)'") }
        guard let port = UInt16(portText) else { throw UsageError("invalid port in '\(text)'") }
        self.host = parts.host.isEmpty ? "0.0.0.0" : String(parts.host)
        self.port = port
    }

    /// `host:port`.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// Writes a line to standard error.
public func printError(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

/// Runs a command's `main`, turning a `UsageError` into exit status 2 (with `usage` printed) and any other
/// error into exit status 1.
public func runCommand(usage: String, _ body: () async throws -> Void) async -> Never {
    do {
        try await body()
        exit(0)
    } catch let error as UsageError {
        printError("error: \(error.message)\n\n\(usage)")
        exit(2)
    } catch {
        printError("error: \(error)")
        exit(1)
    }
}
