import Foundation
import FuzzTargets
import TestSupport
import Testing

/// Every fuzz target's seed corpus and earlier crash inputs (`Tests/Fuzz/TARGET/`), replayed through the same
/// code the fuzzer drives: a broken invariant traps, so an input that once crashed stays a regression test.
@Suite("Fuzz corpora")
struct CorpusReplayTests {
    /// Off the cooperative pool: some targets start a server once and wait for it, which must not hold a pool
    /// thread (two targets doing so at once would hold both threads of a 2-core machine).
    @Test(arguments: FuzzTarget.allCases)
    func everyInputKeepsTheInvariants(_ target: FuzzTarget) async throws {
        let folder = TestEnvironment.packageRoot.appendingPathComponent("Tests/Fuzz/\(target.rawValue)").path
        let names = try FileManager.default.contentsOfDirectory(atPath: folder).filter { !$0.hasPrefix(".") }.sorted()
        #expect(names.count >= 2, "\(target.rawValue) needs a seed corpus")
        try await offPool {
            for name in names {
                // Read with read(2): Foundation leaks a buffer for every empty file (an empty payload is a seed).
                let bytes = Data(ChildProcess.readBytes(folder + "/" + name))
                bytes.withUnsafeBytes { target.run($0) }
            }
        }
    }

    @Test func everyTargetHasACorpusFolder() throws {
        let root = TestEnvironment.packageRoot.appendingPathComponent("Tests/Fuzz").path
        let folders = Set(try FileManager.default.contentsOfDirectory(atPath: root))
        for target in FuzzTarget.allCases { #expect(folders.contains(target.rawValue), "\(target.rawValue)") }
    }
}
