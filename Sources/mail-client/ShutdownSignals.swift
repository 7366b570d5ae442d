import Foundation

/// Turns SIGTERM and SIGINT into a clean exit: the signals are unblocked (a parent may have blocked them),
/// ignored as process signals and handled on a dispatch queue, which runs the registered cleanup and exits 0.
///
/// `@unchecked Sendable`: `lock` guards `cleanup` and `sources`.
final class ShutdownSignals: @unchecked Sendable {
    static let shared = ShutdownSignals()

    private let lock = NSLock()
    private var cleanup: (@Sendable () async -> Void)?
    private var sources: [any DispatchSourceSignal] = []
    private var shuttingDown = false

    func install() {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        sigprocmask(SIG_UNBLOCK, &set, nil)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        signal(SIGPIPE, SIG_IGN)
        for number in [SIGTERM, SIGINT] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [weak self] in self?.shutDown() }
            source.resume()
            lock.withLock { sources.append(source) }
        }
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
