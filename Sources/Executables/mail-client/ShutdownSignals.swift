import CommandLineSupport
import Foundation

/// Turns SIGTERM and SIGINT into a clean exit: runs the registered cleanup and exits 0.
///
/// `@unchecked Sendable`: `lock` guards `cleanup` and `sources`.
final class ShutdownSignals: @unchecked Sendable {
    static let shared = ShutdownSignals()

    private let lock = NSLock()
    private var cleanup: (@Sendable () async -> Void)?
    private var sources: [any DispatchSourceSignal] = []
    private var shuttingDown = false

    func install() {
        let installed = TerminationSignals.install { [weak self] _ in self?.shutDown() }
        lock.withLock { sources = installed }
    }

    /// Sets the work to do before exiting (bounded by a few seconds).
    func onShutdown(_ body: @escaping @Sendable () async -> Void) {
        lock.withLock { cleanup = body }
    }

    private func shutDown() {
        let work: (@Sendable () async -> Void)? = lock.withLock {
            if shuttingDown { return nil }
            shuttingDown = true
            return cleanup ?? {}
        }
        guard let work else { return }
        Task.detached {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await work() }
                group.addTask { try? await Task.sleep(for: .seconds(3)) }
                _ = await group.next()
                group.cancelAll()
            }
            EventOutput.emit("exit", [("reason", .string("signal"))])
            exit(0)
        }
    }
}
