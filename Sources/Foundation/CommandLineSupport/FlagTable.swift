import Foundation

/// One command-line flag as a command declares it: its name, the value it takes and its help text.
///
/// A command lists its flags once, in a `FlagTable`, which both parses the command line and prints the option
/// lines of the command's help.
public struct Flag: Sendable, Hashable {
    /// The name without its dashes: `data-dir` for `--data-dir`.
    public let name: String
    /// What the value is called in the help (`DIR`, `HOST:PORT`); `nil` for a switch, which takes no value.
    public let placeholder: String?
    /// The help text, one or more lines already wrapped to the width of the help.
    public let helpLines: [String]

    /// A flag that takes a value, shown as `placeholder` in the help.
    public init(_ name: String, _ placeholder: String, help helpLines: String...) {
        self.name = name
        self.placeholder = placeholder
        self.helpLines = helpLines
    }

    /// A switch: a flag that takes no value (`--name`, or `--name=true`/`1`/`yes`).
    public init(switch name: String, help helpLines: String...) {
        self.name = name
        self.placeholder = nil
        self.helpLines = helpLines
    }

    /// `--help`, which every table accepts; a table that lists it prints this line for it.
    public static let help = Flag(switch: "help", help: "show this help")

    /// Whether the flag takes no value.
    public var isSwitch: Bool { placeholder == nil }

    /// The flag as the help shows it: `--name PLACEHOLDER`, or `--name` for a switch.
    public var label: String { placeholder.map { "--\(name) \($0)" } ?? "--\(name)" }

    /// The flag's lines of help: two spaces, the label, and the help text from `column` on (on the next line when
    /// the label leaves less than two spaces before it), each further line of help indented to `column`.
    public func helpText(column: Int) -> String {
        let head = "  " + label
        let indent = String(repeating: " ", count: column)
        var lines: [String]
        var rest = helpLines[...]
        if let first = rest.first, head.count + 2 <= column {
            lines = [head + String(repeating: " ", count: column - head.count) + first]
            rest = rest.dropFirst()
        } else {
            lines = [head]
        }
        lines += rest.map { $0.isEmpty ? "" : indent + $0 }
        return lines.joined(separator: "\n")
    }
}

/// The flags one command takes, declared once: the table parses the command line (a flag not in it is refused)
/// and renders the option lines of the command's help, so the two cannot disagree.
///
/// Tables compose with `+`: a group of flags several commands share is a table of its own, added to each
/// command's.
public struct FlagTable: Sendable {
    /// The flags in the order the help lists them.
    public let flags: [Flag]
    /// The column the help text of every option line starts at.
    public let column: Int

    /// A table of `flags` whose help text starts at `column`. A name given twice keeps its first flag.
    public init(column: Int, _ flags: [Flag]) {
        var seen: Set<String> = []
        self.flags = flags.filter { seen.insert($0.name).inserted }
        self.column = column
    }

    /// The flags of `lhs` followed by those of `rhs` that `lhs` does not name, at `lhs`'s column.
    public static func + (lhs: FlagTable, rhs: FlagTable) -> FlagTable {
        FlagTable(column: lhs.column, lhs.flags + rhs.flags)
    }

    /// Every flag's name.
    public var names: Set<String> { Set(flags.map(\.name)) }

    /// The names of the flags that take no value.
    public var switches: Set<String> { Set(flags.filter(\.isSwitch).map(\.name)) }

    /// Whether the table has a flag called `name`.
    public func contains(_ name: String) -> Bool { flags.contains { $0.name == name } }

    /// The option lines of the help, one flag after another, without a final newline.
    public var help: String { flags.map { $0.helpText(column: column) }.joined(separator: "\n") }

    /// Parses `arguments` (without the program name) with the table's switches and `--help`; unless `--help` (or
    /// `-h`) was given, a flag the table does not have is a `UsageError` ("unknown option --name"). Flags not on
    /// the command line are read from `environmentPrefix` variables, as `Arguments` does.
    public func parse(
        _ arguments: [String], environmentPrefix: String,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> Arguments {
        let parsed = try Arguments(
            arguments, switches: switches.union(["help"]), environmentPrefix: environmentPrefix,
            environment: environment)
        if !parsed.wantsHelp { try rejectUnknownFlags(in: parsed) }
        return parsed
    }

    /// Throws a `UsageError` naming the first flag on the command line that the table does not have (`--help`
    /// is always accepted): for arguments parsed with a wider table, such as a program's before it knows which
    /// of its commands runs.
    public func rejectUnknownFlags(in arguments: Arguments) throws {
        try arguments.rejectUnknownFlags(known: names)
    }
}
