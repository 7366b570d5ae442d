import MailSync
import Testing

@Suite("LiveSyncStateMachine")
struct LiveSyncStateMachineTests {
    typealias Machine = LiveSyncStateMachine

    static let policy = SyncRetryPolicy(initialDelay: .milliseconds(100), multiplier: 2, maximumDelay: .seconds(1))

    /// A machine whose stream is open.
    func openMachine(localState: String? = "e-1") -> Machine {
        var machine = Machine(retryPolicy: Self.policy)
        _ = machine.start(localState: localState)
        _ = machine.opened()
        return machine
    }

    @Test("it connects naming the local state, and only from idle")
    func startConnects() {
        var machine = Machine(retryPolicy: Self.policy)
        #expect(machine.start(localState: "e-4") == .connect(lastEventID: "e-4"))
        #expect(machine.start(localState: "e-4") == .none)
        #expect(!machine.isOpen)
        #expect(machine.opened() == .none)
        #expect(machine.isOpen)
        #expect(machine.opened() == .none)
        var fresh = Machine()
        #expect(fresh.start(localState: nil) == .connect(lastEventID: nil))
    }

    @Test("each announced change asks for a sync of its state; pings ask for nothing")
    func changesAskForSyncs() {
        var machine = openMachine()
        #expect(machine.received(.changed(state: "e-2")) == .sync(state: "e-2"))
        #expect(machine.received(.ping) == .none)
        #expect(machine.received(.changed(state: "e-3")) == .sync(state: "e-3"))
        #expect(machine.received(.changed(state: nil)) == .sync(state: nil))
        #expect(machine.lastEventID == "e-3", "an event without an id keeps the last one")
    }

    @Test("events before the stream is open, or after it closed, are ignored")
    func eventsOutsideTheOpenStream() {
        var machine = Machine(retryPolicy: Self.policy)
        #expect(machine.received(.changed(state: "e-2")) == .none)
        _ = machine.start(localState: nil)
        #expect(machine.received(.changed(state: "e-2")) == .none)
        _ = machine.opened()
        _ = machine.closed(nil)
        #expect(machine.received(.changed(state: "e-3")) == .none)
        #expect(machine.lastEventID == nil)
    }

    @Test("a dropped stream is reopened with backoff, naming the local state, else the last event id")
    func reconnectsWithBackoff() {
        var machine = openMachine()
        _ = machine.received(.changed(state: "e-7"))
        let lost = MailSyncError.network("reset")
        #expect(machine.closed(lost) == .reconnect(after: .milliseconds(100), attempt: 1, error: lost))
        #expect(!machine.isOpen)
        #expect(machine.retryDue(localState: "e-6") == .connect(lastEventID: "e-6"))
        #expect(machine.closed(lost) == .reconnect(after: .milliseconds(200), attempt: 2, error: lost))
        #expect(machine.retryDue(localState: nil) == .connect(lastEventID: "e-7"))
        #expect(machine.closed(lost) == .reconnect(after: .milliseconds(400), attempt: 3, error: lost))
        #expect(machine.retryDue(localState: "e-7") == .connect(lastEventID: "e-7"))
        for attempt in 4...12 {
            guard case .reconnect(let after, attempt, _) = machine.closed(lost) else {
                Issue.record("attempt \(attempt) did not reconnect")
                return
            }
            #expect(after <= .seconds(1), "the delay is capped")
            #expect(machine.retryDue(localState: nil) != .none, "attempts never run out")
        }
    }

    @Test("an event resets the backoff; a stream accepted and closed at once still backs off")
    func eventsResetTheBackoff() {
        var machine = openMachine()
        let ended = MailSyncError.network("the event stream ended")
        #expect(machine.closed(nil) == .reconnect(after: .milliseconds(100), attempt: 1, error: ended))
        _ = machine.retryDue(localState: nil)
        _ = machine.opened()
        #expect(machine.closed(nil) == .reconnect(after: .milliseconds(200), attempt: 2, error: ended))
        _ = machine.retryDue(localState: nil)
        _ = machine.opened()
        _ = machine.received(.ping)
        #expect(machine.failures == 0)
        #expect(machine.closed(nil) == .reconnect(after: .milliseconds(100), attempt: 1, error: ended))
    }

    @Test("429 and 5xx are retried, honouring Retry-After; invalid answers are retried too")
    func retryableRefusals() {
        var machine = Machine(retryPolicy: Self.policy)
        _ = machine.start(localState: nil)
        let busy = MailSyncError.server(status: 429, code: nil, retryAfter: .seconds(3))
        #expect(machine.closed(busy) == .reconnect(after: .seconds(3), attempt: 1, error: busy))
        _ = machine.retryDue(localState: nil)
        let down = MailSyncError.server(status: 503, code: nil, retryAfter: nil)
        #expect(machine.closed(down) == .reconnect(after: .milliseconds(200), attempt: 2, error: down))
        _ = machine.retryDue(localState: nil)
        let garbled = MailSyncError.invalidResponse("not an event stream")
        #expect(machine.closed(garbled) == .reconnect(after: .milliseconds(400), attempt: 3, error: garbled))
    }

    @Test("401 stops following until credentials are renewed")
    func unauthorizedStops() {
        var machine = openMachine()
        #expect(machine.closed(.unauthorized) == .stop(.unauthorized))
        #expect(machine.stoppedBy == .unauthorized)
        #expect(machine.retryDue(localState: nil) == .none)
        #expect(machine.start(localState: nil) == .none)
        #expect(machine.credentialsRenewed(localState: "e-9") == .connect(lastEventID: "e-9"))
        #expect(machine.stoppedBy == nil)
        #expect(machine.credentialsRenewed(localState: "e-9") == .none, "only a stopped stream is renewed")
    }

    @Test("a refusal retrying cannot change (no event stream, bad request) stops for good")
    func permanentRefusalsStop() {
        for error in [
            MailSyncError.notFound, .server(status: 400, code: "invalidArgument", retryAfter: nil),
            .server(status: 403, code: nil, retryAfter: nil),
        ] {
            var machine = Machine(retryPolicy: Self.policy)
            _ = machine.start(localState: nil)
            #expect(machine.closed(error) == .stop(error))
            #expect(machine.credentialsRenewed(localState: nil) == .none)
            #expect(machine.retryDue(localState: nil) == .none)
        }
    }

    @Test("closing twice or retrying while open does nothing")
    func outOfPhaseEvents() {
        var machine = openMachine()
        #expect(machine.retryDue(localState: nil) == .none)
        _ = machine.closed(.network("reset"))
        #expect(machine.closed(.network("reset")) == .none)
        #expect(machine.opened() == .none)
    }
}
