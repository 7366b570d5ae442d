import Synchronization

/// A counting semaphore for async code: at most `limit` holders at a time; the rest wait in FIFO order.
final class AsyncSemaphore: Sendable {
    private struct State {
        var available: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
        var head = 0
        var inUse = 0
        var maximumInUse = 0
    }

    private let state: Mutex<State>

    init(limit: Int) {
        precondition(limit > 0)
        state = Mutex(State(available: limit))
    }

    /// Waits for a permit. Waiting is not cancellable: a cancelled task still gets its permit and releases it.
    func acquire() async {
        let acquired = state.withLock { state -> Bool in
            guard state.available > 0 else { return false }
            state.available -= 1
            state.inUse += 1
            state.maximumInUse = max(state.maximumInUse, state.inUse)
            return true
        }
        if acquired { return }
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state -> Bool in
                if state.available > 0 {
                    state.available -= 1
                    state.inUse += 1
                    state.maximumInUse = max(state.maximumInUse, state.inUse)
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    /// Returns a permit, handing it to the longest waiter if any.
    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.head < state.waiters.count {
                let continuation = state.waiters[state.head]
                state.head += 1
                if state.head > 1024, state.head * 2 > state.waiters.count {
                    state.waiters.removeFirst(state.head)
                    state.head = 0
                }
                return continuation  // the permit passes over; inUse is unchanged
            }
            state.available += 1
            state.inUse -= 1
            return nil
        }
        next?.resume()
    }

    /// The highest number of permits held at once so far.
    var maximumInUse: Int { state.withLock { $0.maximumInUse } }
}
