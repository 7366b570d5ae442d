import ConnectionLoop
import Foundation
import Glibc
import Locking
import TestSupport
import Testing

/// An event that comes while a connection's question is with the backend is not lost: the loop holds it and tells
/// the session once the answer is in (the answer may have been read before what the event tells, as an IMAP IDLE
/// connection's delta read can be before a second commit).
@Suite struct ConnectionLoopEventTests {
    /// Where the test holds a question's answer until it lets it go.
    final class Gate: Sendable {
        let held = LockedValue<(connection: UInt64, answer: @Sendable (String) -> Void)?>(nil)
        /// The questions asked so far.
        let asked = LockedValue(0)
    }

    /// Greets, asks the backend on any input, and says what it was told.
    struct Session: LoopSession {
        let gate: Gate

        mutating func opened() -> [LoopAction<String>] { [.send(Array("hello\r\n".utf8))] }
        mutating func received(_ bytes: UnsafeRawBufferPointer) -> [LoopAction<String>] {
            [
                .ask { [gate] connection, answer in
                    gate.held.withLock { $0 = (connection, answer) }
                    gate.asked.withLock { $0 += 1 }
                }
            ]
        }
        mutating func answered(_ answer: String) -> [LoopAction<String>] { [.send(Array("\(answer)\r\n".utf8))] }
        mutating func notified(_ event: String) -> [LoopAction<String>] { [.send(Array("told \(event)\r\n".utf8))] }
        mutating func timedOut() -> [LoopAction<String>] { [.close] }
        var idleTimeoutMilliseconds: Int { 60_000 }
        func closed(connection: UInt64) {}
    }

    /// Runs `body` with a loop of sessions behind `gate` and a client connected to it; stops the loop after.
    private func withLoop(
        _ gate: Gate, _ body: (ConnectionLoop<Session>, LineClient) async throws -> Void
    ) async throws {
        let (listener, port) = try ListeningSocket.bind(host: "127.0.0.1", port: 0)
        defer { close(listener) }
        let loop = try ConnectionLoop<Session>(listener: listener, tls: nil, maxConnections: 4, refusal: "busy\n") {
            _ in Session(gate: gate)
        }
        let finished = DispatchSemaphore(value: 0)
        Thread.start(named: "loop-test") {
            loop.run()
            finished.signal()
        }
        defer {
            loop.stop()
            finished.wait()
        }
        try await body(loop, try LineClient(port: port))
    }

    @Test func anEventWhileTheBackendHasTheQuestionIsToldOnceTheAnswerIsIn() async throws {
        let gate = Gate()
        try await withLoop(gate) { loop, client in
            #expect(client.line(timeout: 30) == "hello")
            client.send("question\n")
            #expect(await eventually { gate.held.withLock { $0 != nil } })
            let (connection, answer) = try #require(gate.held.withLock { $0 })
            // Both go through the loop's inbox, in this order: the event reaches the connection while it still waits.
            loop.notify(connection, "a change")
            answer("the answer")
            #expect(client.line(timeout: 30) == "the answer")
            #expect(client.line(timeout: 30) == "told a change")
        }
    }

    /// A socket stays registered for input while its question is with the backend (no `epoll_ctl` for a client that
    /// waits for its answer); input that comes meanwhile takes the registration off, and is read once the answer is
    /// in, not before and not lost.
    @Test func inputWhileTheBackendHasTheQuestionIsReadOnceTheAnswerIsIn() async throws {
        let gate = Gate()
        try await withLoop(gate) { _, client in
            #expect(client.line(timeout: 30) == "hello")
            client.send("first\n")
            #expect(await eventually { gate.asked.withLock { $0 } == 1 })
            let (_, first) = try #require(gate.held.withLock { $0 })
            client.send("second\n")
            // The second line waits in the socket: the loop takes its registration off rather than read it now.
            first("one")
            #expect(client.line(timeout: 30) == "one")
            #expect(await eventually { gate.asked.withLock { $0 } == 2 })
            let (_, second) = try #require(gate.held.withLock { $0 })
            second("two")
            #expect(client.line(timeout: 30) == "two")
            #expect(gate.asked.withLock { $0 } == 2)
        }
    }
}
