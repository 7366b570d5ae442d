import Foundation
import MailboxStore
import TestSupport
import Testing

@Suite struct CrashDrillTests {
    /// A child process delivers from 8 producers in a loop and is SIGKILLed. Every delivery it reported as
    /// acknowledged is present, its outbox rows are present, and `integrity_check` passes.
    @Test func sigkilledDelivererLosesNoAcknowledgedDelivery() async throws {
        let dir = try TemporaryDirectory(prefix: "store-crash")
        let path = dir.path("mail.sqlite")
        for round in 1...3 {
            let child = try ChildProcess(
                TestEnvironment.executable("signalfetch-bench").path, ["store-crash-writer", "--db", path],
                logDirectory: dir.url.path)
            let enough = child.waitForOutput(timeout: 60) { $0.split(separator: "\n").count >= 300 * round }
            child.stop(signal: SIGKILL)
            try #require(enough, "the writer did not get going: \(child.errorOutput)")
            // Only whole lines: the last one may have been cut by the kill.
            let acknowledged = child.output.split(separator: "\n", omittingEmptySubsequences: true)
                .filter { $0.count == 24 }.map(String.init)

            var configuration = MailboxStore.Configuration()
            configuration.passwordParameters = .testing
            let store = try MailboxStore(path: path, configuration: configuration)
            #expect(try await store.integrityCheck() == "ok")
            let account = try #require(try await store.account(username: "bench"))
            var missing: [String] = []
            for id in acknowledged where try await store.message(id: id, accountID: account.id) == nil {
                missing.append(id)
            }
            #expect(missing.isEmpty, "round \(round): \(missing.count) acknowledged deliveries lost")
            #expect(try await store.outboxStats().depth == 2, "one outbox row per device survives")
            let claimed = try await store.claimDueSignals()
            #expect(claimed.allSatisfy { $0.modseq == account.modseq })
        }
    }
}
