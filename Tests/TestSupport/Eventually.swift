/// How long ``eventually(timeout:_:)`` waits by default before it gives up: long enough for the slowest machine
/// and sanitizer build to get there, so it only ever ends a test whose event never comes.
public let eventTimeout: Duration = .seconds(30)

/// How often the wait helpers look at their condition again.
private let pollInterval: Duration = .milliseconds(10)

/// Waits for an event: looks at `condition` until it holds and returns `true`, or returns `false` once `timeout`
/// has passed without it holding.
///
/// Tests wait for what they expect to happen (a message arrived, a count reached, a process printed a line), never
/// for a length of time. `timeout` is a guard that turns a hang into a failure; it is not a claim about how soon
/// the event comes, so keep it generous and never assert on how long the wait took.
///
/// ```swift
/// #expect(await eventually { server.openConnections == 0 })
/// ```
public func eventually(timeout: Duration = eventTimeout, _ condition: () throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try condition() { return true }
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: pollInterval)
    }
}

/// Waits for an event that takes an `await` to observe (a request to a server, a read from a store): calls
/// `condition` until it returns `true`, or returns `false` once `timeout` has passed without it doing so. Each
/// call finishes before the next begins.
///
/// The same rules as the synchronous form apply: the timeout is a guard against a hang, not a claim.
///
/// ```swift
/// #expect(try await eventually { try await store.outboxDepth() == 0 })
/// ```
public func eventually(
    timeout: Duration = eventTimeout, _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try await condition() { return true }
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: pollInterval)
    }
}

/// Checks that something does not happen: looks at `condition` for `duration` and returns `false` as soon as it
/// holds, `true` if it never did.
///
/// This one waits for a length of time by design, so it is the last resort. Prefer an event that must come after
/// the one that should not happen: make a second, distinguishable change, wait for its effect, then check that
/// the first left no trace. Use `never(within:_:)` only where nothing later can show it, and keep `duration`
/// short: a `true` result says the event did not come within `duration`, not that it never will.
///
/// ```swift
/// // A stopped follower does not reopen its stream (nothing it does afterwards would show it).
/// #expect(await never(within: .milliseconds(200)) { server.openings.count > 1 })
/// ```
public func never(within duration: Duration, _ condition: () throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + duration
    while ContinuousClock.now < deadline {
        if try condition() { return false }
        try? await Task.sleep(for: pollInterval)
    }
    return try !condition()
}
