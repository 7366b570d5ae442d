import Foundation
import TestSupport
import Testing

/// What an app copies (the sync engine, the wire model it shares with the server, its event-stream parser, the lock and
/// the URLSession exchange) builds with Apple's Foundation as it does here: its sources import nothing Linux-only (no
/// libcurl, no C target of this project), each platform's modules (FoundationNetworking, Security, Glibc, Darwin) only
/// under `#if canImport` of that module, and its targets depend on nothing else.
@Suite struct PortabilityTests {
    /// The portable targets and the modules each may import.
    static let portable: [String: Set<String>] = [
        "ServerSentEvents": ["Foundation"],
        // The wire model the store writes and the client reads: the standard library only.
        "MailModel": [],
        // The project's lock (pthread-based, so ThreadSanitizer sees it, which it does not for `Mutex` on Linux).
        "Locking": ["Foundation", "Dispatch"],
        "MailSync": ["Foundation", "MailModel", "ServerSentEvents", "Locking"],
        "MailSyncURLSession": ["Foundation", "MailSync", "Locking"],
    ]
    /// Modules a portable source may import only inside `#if canImport(…)` (or `#elseif canImport(…)`) of the same
    /// module: each platform's own.
    static let conditional: Set<String> = ["FoundationNetworking", "Security", "Glibc", "Darwin"]

    /// The imports of a Swift source: (module, the `#if canImport` module it sits under, if any).
    static func imports(of source: String) -> [(module: String, guardedBy: String?)] {
        var found: [(String, String?)] = []
        var guards: [String?] = []
        for raw in source.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("#if ") {
                guards.append(canImported(line.dropFirst("#if ".count)))
            } else if line.hasPrefix("#elseif ") {
                _ = guards.popLast()
                guards.append(canImported(line.dropFirst("#elseif ".count)))
            } else if line.hasPrefix("#else") {
                _ = guards.popLast()
                guards.append(nil)
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

    /// The module a `canImport(…)` condition names, if that is the condition.
    static func canImported(_ condition: Substring) -> String? {
        guard condition.hasPrefix("canImport(") else { return nil }
        return String(condition.dropFirst("canImport(".count).prefix { $0 != ")" })
    }

    /// Every import of the portable targets' sources that breaks the rule, as `file: module`.
    static func violations() throws -> [String] {
        var violations: [String] = []
        for (target, allowed) in portable {
            let folder = try TestEnvironment.sourceFolder(of: target)
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
        #expect(try Self.violations() == [])
    }

    @Test func thePortableTargetsDependOnNothingElse() throws {
        let manifest = try String(
            contentsOf: TestEnvironment.packageRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
        let compact = manifest.filter { !$0.isWhitespace }
        #expect(compact.contains(#".target(name:"ServerSentEvents"),"#))
        #expect(compact.contains(#".target(name:"Locking"),"#))
        #expect(compact.contains(#".target(name:"MailModel"),"#))
        #expect(compact.contains(#".target(name:"MailSync",dependencies:["MailModel","ServerSentEvents","Locking"]),"#))
        #expect(compact.contains(#".target(name:"MailSyncURLSession",dependencies:["MailSync","Locking"]),"#))
    }

    /// The check itself fails on what it is there to catch.
    @Test func theCheckCatchesALinuxOnlyImport() throws {
        let sources = [
            "import Glibc\nimport MailSync\n",
            "import Foundation\nimport CCurl\n",
            "#if canImport(Security)\nimport FoundationNetworking\n#endif\n",
            "#if canImport(Darwin)\nimport Darwin\n#else\nimport Glibc\n#endif\n",
            "import FoundationNetworking\n",
        ]
        for source in sources {
            let bad = Self.imports(of: source).filter { module, guardedBy in
                !Self.portable["MailSyncURLSession", default: []].contains(module)
                    && !(Self.conditional.contains(module) && guardedBy == module)
            }
            #expect(!bad.isEmpty, "\(source)")
        }
        let fine =
            "import Foundation\n#if canImport(FoundationNetworking)\n    import FoundationNetworking\n#endif\n"
            + "#if canImport(Glibc)\n    import Glibc\n#elseif canImport(Darwin)\n    import Darwin\n#endif\n"
        #expect(Self.imports(of: fine).allSatisfy { $0.module == "Foundation" || $0.guardedBy == $0.module })
    }
}
