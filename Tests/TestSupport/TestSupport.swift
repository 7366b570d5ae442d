import Foundation
import Locking

/// Paths and tools that tests share: the package root, built products, the test venv's Python.
public enum TestEnvironment {
    /// The package root (the folder holding `Package.swift`).
    public static let packageRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) {
                return url
            }
        }
        fatalError("Package.swift not found above \(#filePath)")
    }()

    /// The folder that holds the built executables (`.build/debug` or `.build/release`).
    public static let productsDirectory: URL = {
        if let explicit = ProcessInfo.processInfo.environment["SIGNALFETCH_PRODUCTS"] {
            return URL(fileURLWithPath: explicit)
        }
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var url = executable.deletingLastPathComponent()
        // On Linux the test runner is `.build/<triple>/debug/<Package>PackageTests.xctest`.
        while url.path != "/" {
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("mailboxd").path) { return url }
            url.deleteLastPathComponent()
        }
        return packageRoot.appendingPathComponent(".build/debug")
    }()

    /// The URL of a built executable product, e.g. `executable("mailboxd")`.
    public static func executable(_ name: String) -> URL {
        productsDirectory.appendingPathComponent(name)
    }

    /// A target's source folder, `Sources/<layer>/<target>`, in whichever layer `Package.swift` puts it.
    public static func sourceFolder(of target: String) throws -> URL {
        let sources = packageRoot.appendingPathComponent("Sources")
        for layer in try FileManager.default.contentsOfDirectory(atPath: sources.path).sorted() {
            let folder = sources.appendingPathComponent(layer).appendingPathComponent(target)
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: folder.path, isDirectory: &isFolder), isFolder.boolValue {
                return folder
            }
        }
        throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: "Sources/*/\(target)"])
    }

    /// The path of a Python peer kept in `Tests/Peers/` (a real client the tests drive a server with).
    public static func peer(_ name: String) -> String {
        packageRoot.appendingPathComponent("Tests/Peers/\(name)").path
    }

    /// The Python interpreter of the test venv (`SIGNALFETCH_PYTHON`, else `<root>/.venv/bin/python3`).
    public static var python: String {
        if let explicit = ProcessInfo.processInfo.environment["SIGNALFETCH_PYTHON"] { return explicit }
        return packageRoot.appendingPathComponent(".venv/bin/python3").path
    }
}

/// A fresh temporary directory, removed when the value is released.
public final class TemporaryDirectory: Sendable {
    /// The directory's URL.
    public let url: URL

    /// Creates a new empty directory under the system temporary folder.
    public init(prefix: String = "signalfetch-test") throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(prefix)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The path of `name` inside the directory.
    public func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// The result of a finished child process.
public struct ProcessResult: Sendable {
    /// The exit status (or the signal number when `terminatedBySignal`).
    public var status: Int32
    /// Whether the process ended because of a signal.
    public var terminatedBySignal: Bool
    /// Everything the process wrote to standard output.
    public var stdout: String
    /// Everything the process wrote to standard error.
    public var stderr: String

    /// Creates a result.
    public init(status: Int32, terminatedBySignal: Bool, stdout: String, stderr: String) {
        self.status = status
        self.terminatedBySignal = terminatedBySignal
        self.stdout = stdout
        self.stderr = stderr
    }
}

/// Runs child processes for tests.
public enum Subprocess {
    /// Runs `executable` with `arguments` to completion, feeding `input` on standard input.
    public static func run(
        _ executable: String, _ arguments: [String], input: String? = nil,
        environment: [String: String]? = nil
    ) throws -> ProcessResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let out = Pipe()
        let err = Pipe()
        let inPipe = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = inPipe
        try process.run()
        if let input { inPipe.fileHandleForWriting.write(Data(input.utf8)) }
        try? inPipe.fileHandleForWriting.close()
        // Read both pipes concurrently so neither fills up and blocks the child.
        let errData = LockedData()
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) { errData.set(err.fileHandleForReading.readDataToEndOfFile()) }
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        process.waitUntilExit()
        return ProcessResult(
            status: process.terminationStatus,
            terminatedBySignal: process.terminationReason == .uncaughtSignal,
            stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData.get(), as: UTF8.self))
    }

    /// Finds `name` on `PATH`.
    public static func which(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for dir in path.split(separator: ":") {
            let candidate = "\(dir)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }
}

/// A `Data` value guarded by a lock, for handing results between threads.
final class LockedData: @unchecked Sendable {  // every access goes through `lock`
    private let lock = NSLock()
    private var data = Data()
    func set(_ value: Data) { lock.withLock { data = value } }
    func get() -> Data { lock.withLock { data } }
}

/// 127.0.0.1:`port`.
private func loopbackAddress(port: UInt16) -> sockaddr_in {
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = port.bigEndian
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    return addr
}

/// The ports tests hand to the servers they start: below the kernel's ephemeral range, so no outgoing
/// connection's source port takes one between the check and the server's bind, and handed out in turn, so no port
/// is given twice until the whole range (about 22,000 here) has been (binding port 0 and releasing it could do
/// both).
private let portAllocator = LockedValue(PortAllocator())

private struct PortAllocator {
    /// Where handing out starts: after the range's start by the process id, so test processes side by side start
    /// apart.
    var next: Int
    let range: Range<Int>

    init() {
        // `ip_local_port_range` is "low high"; ports below `low` are never picked by the kernel for connect().
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        let low = text.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } ?? 32_768
        range = low >= 12_000 ? 10_000..<low : 40_000..<65_000
        next = range.lowerBound + Int(getpid()) * 97 % range.count
    }

    /// The first of `length` consecutive ports, each free now, after the last run handed out.
    mutating func take(_ length: Int) -> UInt16? {
        for _ in 0..<range.count {
            if next + length > range.upperBound { next = range.lowerBound }
            let first = next
            next += 1
            let run = (first..<first + length).map { UInt16($0) }
            if run.allSatisfy({ isFreeLocalPort($0) }) {
                next = first + length
                return run[0]
            }
        }
        return nil
    }
}

/// A free TCP port on 127.0.0.1 that no other recent call in this process returned (see `portAllocator`).
public func freeLocalPort() -> UInt16 {
    freeLocalPorts(length: 1)
}

/// The first of `length` consecutive free TCP ports on 127.0.0.1, none handed out recently in this process.
public func freeLocalPorts(length: Int) -> UInt16 {
    guard let first = portAllocator.withLock({ $0.take(length) }) else {
        preconditionFailure("no run of \(length) free loopback ports below the ephemeral range")
    }
    return first
}

/// Whether `port` on 127.0.0.1 can be bound now.
public func isFreeLocalPort(_ port: UInt16) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var addr = loopbackAddress(port: port)
    let bound = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    return bound == 0
}
