import Foundation
import TestSupport
import Testing

/// What an app copies (the sync engine, its event-stream parser and the URLSession exchange) builds with Apple's
/// Foundation as it does here: its sources import nothing Linux-only (no Glibc, no libcurl, no C target of this
/// project), FoundationNetworking and Security only under `#if canImport`, and its targets depend on nothing else.
@Suite struct PortabilityTests {
    /// The portable targets and the modules each may import.
    static let portable: [String: Set<String>] = [
        "ServerSentEvents": ["Foundation"],
        "MailSync": ["Foundation", "Synchronization", "ServerSentEvents"],
        "MailSyncURLSession": ["Foundation", "Synchronization", "MailSync"],
    ]
    /// Modules a portable source may import only inside `#if canImport(…)` of the same module.
    static let conditional: Set<String> = ["FoundationNetworking", "Security"]

    /// The imports of a Swift source: (module, the `#if canImport` module it sits under, if any).
    static func imports(of source: String) -> [(module: String, guardedBy: String?)] {
        var found: [(String, String?)] = []
        var guards: [String?] = []
        for raw in source.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("#if ") {
                let condition = line.dropFirst(4)
                let module =
                    condition.hasPrefix("canImport(")
                    ? String(condition.dropFirst("canImport(".count).prefix { $0 != ")" }) : nil
                guards.append(module)
            } else if line.hasPrefix("#endif") {
                _ = guards.popLast()
            } else if line.hasPrefix("import ") || line.hasPrefix("@testable import ")
                || line.hasPrefix("@_exported import ")
            {
                let module = line.split(separator: " ").last.map(String.init) ?? ""
                found.append((module, guards.compactMap { $0 }.last))
            }
        }
        return found
    }

    /// Every import of the portable targets' sources that breaks the rule, as `file: module`.
    static func violations(in root: URL) throws -> [String] {
        var violations: [String] = []
        for (target, allowed) in portable {
            let folder = root.appendingPathComponent("Sources/\(target)")
            for file in try FileManager.default.contentsOfDirectory(atPath: folder.path) where file.hasSuffix(".swift")
            {
                let source = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
                for (module, guardedBy) in imports(of: source)
                where !allowed.contains(module) && !(conditional.contains(module) && guardedBy == module) {
                    violations.append("\(target)/\(file): \(module)")
                }
            }
        }
        return violations.sorted()
    }

    @Test func thePortableTargetsImportNothingLinuxOnly() throws {
        #expect(try Self.violations(in: TestEnvironment.packageRoot) == [])
    }

    @Test func thePortableTargetsDependOnNothingElse() throws {
        let manifest = try String(
            contentsOf: TestEnvironment.packageRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
        let compact = manifest.filter { !$0.isWhitespace }
        #expect(compact.contains(#".target(name:"ServerSentEvents"),"#))
        #expect(compact.contains(#".target(name:"MailSync",dependencies:["ServerSentEvents"]),"#))
        #expect(compact.contains(#".target(name:"MailSyncURLSession",dependencies:["MailSync"]),"#))
    }

    /// The check itself fails on what it is there to catch.
    @Test func theCheckCatchesALinuxOnlyImport() throws {
        let sources = [
            "import Glibc\nimport MailSync\n",
            "import Foundation\nimport CCurl\n",
            "#if canImport(Security)\nimport FoundationNetworking\n#endif\n",
            "import FoundationNetworking\n",
        ]
        for source in sources {
            let bad = Self.imports(of: source).filter { module, guardedBy in
                !Self.portable["MailSyncURLSession", default: []].contains(module)
                    && !(Self.conditional.contains(module) && guardedBy == module)
            }
            #expect(!bad.isEmpty, "\(source)")
        }
        let fine = "import Foundation\n#if canImport(FoundationNetworking)\n    import FoundationNetworking\n#endif\n"
        #expect(Self.imports(of: fine).allSatisfy { $0.module == "Foundation" || $0.guardedBy == $0.module })
    }
}
