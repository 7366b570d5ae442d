import Foundation
import FuzzTargets

#if FUZZING
    /// libFuzzer's driver (linked in by `-sanitize=fuzzer`): parses its flags, then calls `callback` per input.
    @_silgen_name("LLVMFuzzerRunDriver")
    func LLVMFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt

    nonisolated(unsafe) var selected: FuzzTarget?

    /// libFuzzer's entry for one input (its runtime refers to the symbol; the driver below is handed it too).
    @_cdecl("LLVMFuzzerTestOneInput")
    func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        selected!.run(UnsafeRawBufferPointer(start: data, count: size))
        return 0
    }
#endif

/// `signalfetch-fuzz TARGET [libFuzzer flags] [corpus…]`. Built by `Scripts/fuzz` with `-sanitize=fuzzer,address
/// -DFUZZING` it is a coverage-guided fuzzer for one target; in the ordinary build it replays files: every file
/// named (or in a folder named) once through the target, which is how the seed corpora and the inputs of earlier
/// crashes run as regression tests.
@main
struct FuzzMain {
    static func main() {
        var arguments = CommandLine.arguments
        guard arguments.count >= 2, let target = FuzzTarget(rawValue: arguments[1]) else {
            let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: " ")
            FileHandle.standardError.write(Data("usage: signalfetch-fuzz TARGET [FILE|DIR…]; targets: \(names)\n".utf8))
            exit(2)
        }
        arguments.remove(at: 1)
        #if FUZZING
            selected = target
            var argc = CInt(arguments.count)
            var argv = arguments.map { strdup($0) } + [nil]
            let status = argv.withUnsafeMutableBufferPointer { buffer -> CInt in
                var pointer = buffer.baseAddress
                return LLVMFuzzerRunDriver(&argc, &pointer, fuzzOneInput)
            }
            exit(status)
        #else
            var count = 0
            for path in arguments.dropFirst() {
                for file in files(at: path) {
                    let bytes = FileManager.default.contents(atPath: file) ?? Data()
                    bytes.withUnsafeBytes { target.run($0) }
                    count += 1
                }
            }
            print("signalfetch-fuzz \(target.rawValue): \(count) inputs replayed, no invariant broken")
        #endif
    }

    static func files(at path: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return [] }
        guard isDirectory.boolValue else { return [path] }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().flatMap { files(at: path + "/" + $0) }
    }
}
