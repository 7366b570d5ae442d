import Foundation
import Locking

/// SIGTERM and SIGINT handling shared by every SignalFetch binary.
public enum TerminationSignals {
    /// Unblocks SIGTERM and SIGINT (a parent may have started the process with them blocked), lets SIGPIPE be
    /// ignored, and calls `handler` once, on the first SIGTERM or SIGINT. Keep the returned sources alive for as
    /// long as the handler should run.
    public static func install(_ handler: @escaping @Sendable (Int32) -> Void) -> [any DispatchSourceSignal] {
        var mask = sigset_t()
        sigemptyset(&mask)
        sigaddset(&mask, SIGTERM)
        sigaddset(&mask, SIGINT)
        pthread_sigmask(SIG_UNBLOCK, &mask, nil)
        signal(SIGPIPE, SIG_IGN)
        let fired = FiredFlag()
        return [SIGTERM, SIGINT].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                if fired.fireOnce() { handler(number) }
            }
            source.resume()
            return source
        }
    }

    /// Waits for the first SIGTERM or SIGINT.
    public static func wait() async {
        var sources: [any DispatchSourceSignal] = []
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            sources = install { _ in continuation.resume() }
        }
        for source in sources { source.cancel() }
    }
}

/// A flag that turns on once, for running a handler a single time from any thread.
private final class FiredFlag: Sendable {
    private let fired = LockedValue(false)

    /// Returns `true` the first time only.
    func fireOnce() -> Bool {
        fired.withLock { fired in
            defer { fired = true }
            return !fired
        }
    }
}

/// SIGHUP as a request to reload: each one runs `handler` on a queue of its own, one at a time.
public enum ReloadSignal {
    /// Unblocks SIGHUP and runs `handler` on each; keep the returned source for as long as it should (cancel it to
    /// stop).
    public static func install(_ handler: @escaping @Sendable () -> Void) -> any DispatchSourceSignal {
        var mask = sigset_t()
        sigemptyset(&mask)
        sigaddset(&mask, SIGHUP)
        pthread_sigmask(SIG_UNBLOCK, &mask, nil)
        signal(SIGHUP, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: DispatchQueue(label: "reload"))
        source.setEventHandler(handler: handler)
        source.resume()
        return source
    }

    /// Sends SIGHUP to the process whose id `pidFile` holds, and returns that id.
    public static func send(pidFile: String) throws(UsageError) -> Int32 {
        guard let text = try? String(contentsOfFile: pidFile, encoding: .utf8),
            let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), pid > 1
        else { throw UsageError("cannot read a process id from \(pidFile)") }
        guard kill(pid, SIGHUP) == 0 else {
            throw UsageError("cannot signal process \(pid) (from \(pidFile)): \(String(cString: strerror(errno)))")
        }
        return pid
    }
}
