import Foundation
import Synchronization

/// Process-wide settings a server with thousands of connections needs.
public enum ProcessResources {
    /// Raises the soft open-file limit to the hard limit (each notification stream holds a socket)
    /// and returns the new soft limit.
    @discardableResult
    public static func raiseOpenFileLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return -1 }
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        return Int(clamping: limit.rlim_cur)
    }

    /// Unblocks SIGTERM and SIGINT (a parent may have started the process with them blocked), lets
    /// SIGPIPE be ignored, and calls `handler` once on the first SIGTERM or SIGINT.
    /// Keep the returned sources alive for as long as the handler should run.
    public static func onTerminationSignal(_ handler: @escaping @Sendable (Int32) -> Void) -> [any DispatchSourceSignal]
    {
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
}

/// A flag that turns on once, for running a handler a single time from any thread.
private final class FiredFlag: Sendable {
    private let fired = Mutex(false)

    /// Returns `true` the first time only.
    func fireOnce() -> Bool {
        fired.withLock { fired in
            defer { fired = true }
            return !fired
        }
    }
}
