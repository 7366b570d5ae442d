import Dispatch

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A mutual-exclusion lock on `pthread_mutex_t`.
///
/// The project's lock for shared state, because the sanitizers see it: ThreadSanitizer intercepts `pthread_mutex_lock` and
/// `pthread_mutex_unlock`, while on Linux `Synchronization.Mutex` synchronizes through futexes it cannot see, so
/// every access under a `Mutex` is reported as a race (the shape of swift-nio's `NIOLock`).
public final class Lock: @unchecked Sendable {  // the pthread mutex is what makes it Sendable
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

    /// Creates an unlocked lock.
    public init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        #if DEBUG
            // Relocking or unlocking from the wrong thread fails instead of deadlocking or corrupting.
            pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
        #elseif canImport(Glibc)
            // Spin briefly before sleeping in the kernel, as Synchronization.Mutex does: the project's critical
            // sections are a few hundred nanoseconds, far shorter than a futex sleep and wake-up.
            pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        #endif
        let status = pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
    }

    deinit {
        let status = pthread_mutex_destroy(mutex)
        assert(status == 0, "pthread_mutex_destroy failed: \(status)")
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Takes the lock, waiting for it if another thread holds it.
    @inlinable
    public func lock() {
        let status = pthread_mutex_lock(mutex)
        precondition(status == 0, "pthread_mutex_lock failed")
    }

    /// Releases the lock; only the thread that took it may.
    @inlinable
    public func unlock() {
        let status = pthread_mutex_unlock(mutex)
        precondition(status == 0, "pthread_mutex_unlock failed")
    }

    /// Runs `body` with the lock held.
    @inlinable
    public func withLock<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// A value reachable only with its lock held: the closure-scoped API of `Synchronization.Mutex`
/// (`let state = LockedValue(State())`, `state.withLock { $0.count += 1 }`) on a ``Lock``.
///
/// The value goes in and comes out as `sending`, as with `Mutex`, so a value that is not `Sendable` can be
/// shared this way without escaping into two isolation domains.
///
/// Keep a closure inside a struct, never as the value itself (`LockedValue<Handler?>`, not
/// `LockedValue<((Int) -> Void)?>`): a closure that is the value is wrapped in two more reabstraction thunks by every
/// `withLock` whose call is not specialized, and each call of it then runs through all of them.
public final class LockedValue<Value: ~Copyable>: @unchecked Sendable {  // every access to `value` holds `lock`
    @usableFromInline let lock = Lock()
    @usableFromInline var value: Value

    /// Creates the box holding `value`.
    public init(_ value: consuming sending Value) {
        self.value = value
    }

    /// Runs `body` with the lock held and the value open for change.
    @inlinable
    public func withLock<Result: ~Copyable, Failure: Error>(
        _ body: (inout sending Value) throws(Failure) -> sending Result
    ) throws(Failure) -> sending Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// Runs `body` on Swift's cooperative pool and blocks the calling thread until it returns: for threads of their
/// own (a socket's session thread, a fuzzer's driver) calling async code. Never call it on the cooperative pool
/// itself: the pool is as wide as the cores, and a blocked pool thread may be the one `body` needs.
public func waitForTask<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let result = LockedValue<T?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        let value = await body()
        result.withLock { $0 = value }
        done.signal()
    }
    done.wait()
    return result.withLock { $0! }
}
