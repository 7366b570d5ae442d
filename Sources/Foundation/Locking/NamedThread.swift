import Foundation

extension Thread {
    /// Starts a thread that runs `body` under `name` as the kernel shows it (`top -H`, `perf`,
    /// `/proc/PID/task/*/comm`): Foundation's `Thread.name` on Linux names only the `Thread` object, and a thread
    /// otherwise keeps the name of the one that started it. The kernel keeps the first 15 bytes.
    public static func start(named name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) {
        let thread = Thread {
            nameCurrentThread(name)
            body()
        }
        thread.name = name
        if let stackSize { thread.stackSize = stackSize }
        thread.start()
    }
}

/// Names the calling thread for the kernel (what `pthread_setname_np` does, which Glibc's Swift module does not
/// offer): the first 15 bytes of `name`, cut at a character boundary, into `/proc/thread-self/comm`.
private func nameCurrentThread(_ name: String) {
    var bytes = Array(name.utf8.prefix(15))
    while !bytes.isEmpty, String(validating: bytes, as: UTF8.self) == nil { bytes.removeLast() }
    let file = open("/proc/thread-self/comm", O_WRONLY)
    guard file >= 0 else { return }
    _ = bytes.withUnsafeBytes { write(file, $0.baseAddress, $0.count) }
    close(file)
}
