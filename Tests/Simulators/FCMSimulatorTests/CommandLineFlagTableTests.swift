import CommandLineSupport
import Testing

/// `FlagTable`, the one list of a command's flags that both parses its command line and prints its option lines.
@Suite struct CommandLineFlagTableTests {
    static let table = FlagTable(
        column: 24,
        [
            Flag("listen", "HOST:PORT", help: "where to listen"),
            Flag("provider-key", "KEY_ID:TEAM_ID:PATH", help: "a trusted key (repeatable)"),
            Flag(switch: "h2c", help: "cleartext HTTP/2", "instead of TLS"),
            Flag("seed", "N", help: "seed"),
        ])

    @Test func optionLinesStartTheirHelpAtTheTablesColumn() {
        #expect(
            Self.table.help == """
                  --listen HOST:PORT    where to listen
                  --provider-key KEY_ID:TEAM_ID:PATH
                                        a trusted key (repeatable)
                  --h2c                 cleartext HTTP/2
                                        instead of TLS
                  --seed N              seed
                """)
        // A label that leaves exactly two spaces before the column keeps its help on its line; one space less
        // moves the help to the next.
        #expect(Flag("abcdefghijklmnopqr", "X", help: "fits").helpText(column: 26) == "  --abcdefghijklmnopqr X  fits")
        #expect(
            Flag("abcdefghijklmnopqrs", "X", help: "moves").helpText(column: 26)
                == "  --abcdefghijklmnopqrs X\n" + String(repeating: " ", count: 26) + "moves")
    }

    @Test func namesAndSwitchesComeFromTheTable() {
        #expect(Self.table.names == ["listen", "provider-key", "h2c", "seed"])
        #expect(Self.table.switches == ["h2c"])
        #expect(Self.table.contains("seed") && !Self.table.contains("help"))
        #expect(Flag.help.isSwitch && Flag.help.label == "--help")
    }

    @Test func tablesComposeInOrderKeepingTheFirstFlagOfAName() {
        let shared = FlagTable(
            column: 10, [Flag("server", "URL", help: "the server"), Flag("ca", "PEM", help: "a CA")])
        let own = FlagTable(column: 30, [Flag("ca", "FILE", help: "another CA"), Flag(switch: "once", help: "once")])
        let combined = shared + own
        #expect(combined.flags.map(\.label) == ["--server URL", "--ca PEM", "--once"])
        #expect(combined.column == 10)
        #expect(combined.switches == ["once"])
    }

    @Test func parsingTakesTheTablesSwitchesAndRefusesOtherFlags() throws {
        let parsed = try Self.table.parse(
            ["serve", "--h2c", "next", "--listen", "127.0.0.1:1"], environmentPrefix: "T_",
            environment: ["T_SEED": "7"])
        #expect(parsed.flag("h2c"))
        #expect(parsed.positionals == ["serve", "next"])
        #expect(parsed.string("listen") == "127.0.0.1:1")
        #expect(try parsed.int("seed", default: 0) == 7)

        let error = #expect(throws: UsageError.self) {
            try Self.table.parse(["--listen", "x", "--lisen", "y"], environmentPrefix: "T_", environment: [:])
        }
        #expect(error?.message == "unknown option --lisen")

        // --help is always accepted, and with it an unknown flag is not an error (the help is printed instead).
        let help = try Self.table.parse(["--help", "--bogus", "1"], environmentPrefix: "T_", environment: [:])
        #expect(help.wantsHelp)
        #expect(throws: UsageError.self) { try Self.table.rejectUnknownFlags(in: help) }
        let wider = try (Self.table + FlagTable(column: 24, [Flag("extra", "X", help: "extra")]))
            .parse(["--extra", "1"], environmentPrefix: "T_", environment: [:])
        #expect(throws: UsageError.self) { try Self.table.rejectUnknownFlags(in: wider) }
    }
}
