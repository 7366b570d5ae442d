import Foundation
import TestSupport
import Testing

/// The flags this mailbox's newer features read: each mistake is a start-up error naming the flag (exit 2),
/// never a server that starts half configured.
@Suite("Start-up errors: LMTP, pacing, fleet")
struct StartupErrorTests {
    @Test func badLMTPAndPacingFlagsAreClearErrors() throws {
        let directory = try TemporaryDirectory(prefix: "startup-errors")
        let mailboxd = TestEnvironment.executable("mailboxd").path
        let data = directory.path("data")
        _ = try Subprocess.run(mailboxd, ["dev-setup", "--data-dir", data])
        let serve = ["serve", "--data-dir", data, "--listen", "127.0.0.1:0", "--apns-topic", "com.example.a"]
        let cases: [([String], String)] = [
            (["--lmtp-hostname", "mbox.example"], "give --lmtp-listen too"),
            (["--lmtp-listen", "127.0.0.1:0", "--max-message-bytes", "10"], "--max-message-bytes must be between"),
            (["--lmtp-listen", "127.0.0.1:0", "--lmtp-max-connections", "0"], "--lmtp-max-connections must be"),
            (["--lmtp-listen", "127.0.0.1:0", "--lmtp-hostname", "two words"], "--lmtp-hostname must be a host name"),
            (["--signal-burst", "0"], "--signal-burst must be 1 to 10000"),
            (["--signal-refill-per-minute", "0"], "--signal-refill-per-minute 1 to 60000"),
        ]
        for (flags, message) in cases {
            let result = try Subprocess.run(mailboxd, serve + flags)
            #expect(result.status == 2, "\(flags): exit \(result.status): \(result.stderr)")
            #expect(result.stderr.contains(message), "\(flags): \(result.stderr)")
        }
    }

    @Test func aFleetLineThatIsNotNameUserPasswordIsAClearError() throws {
        let directory = try TemporaryDirectory(prefix: "fleet-errors")
        let client = TestEnvironment.executable("mail-client").path
        let arguments = [
            "fleet", "--server", "https://127.0.0.1:9", "--sim", "http://127.0.0.1:9", "--state-dir",
            directory.path("fleet"),
        ]
        let fields = try Subprocess.run(client, arguments, input: "phone alice\n")
        #expect(fields.status == 2, "exit \(fields.status): \(fields.stderr)")
        #expect(fields.stderr.contains("NAME USERNAME PASSWORD"), "\(fields.stderr)")
        let empty = try Subprocess.run(client, arguments, input: "\n")
        #expect(empty.status == 2, "exit \(empty.status): \(empty.stderr)")
        #expect(empty.stderr.contains("no devices on standard input"), "\(empty.stderr)")
    }
}
