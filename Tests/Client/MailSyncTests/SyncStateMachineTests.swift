import MailSync
import Testing

@Suite("SyncStateMachine")
struct SyncStateMachineTests {
    typealias Machine = SyncStateMachine

    @Test("the first run is a full resync; its result sets the local state")
    func firstRunIsFullResync() {
        var machine = Machine(localState: nil)
        #expect(machine.trigger(.launch) == .startSync(.fullResync))
        let action = machine.fullResyncApplied(state: "s5", counts: ChangeCounts(created: 5))
        guard case .finish(let report, nil) = action else {
            Issue.record("expected finish, got \(action)")
            return
        }
        #expect(report.fullResync && report.created == 5 && report.state == "s5" && report.outcome == .completed)
        #expect(report.fetchResult == .newData)
        #expect(machine.localState == "s5" && !machine.isSyncing)
    }

    @Test("with a local state, a run pages changes until hasMore is false")
    func pagesChanges() {
        var machine = Machine(localState: "s1")
        #expect(machine.trigger(.timer) == .startSync(.fetchChanges(since: "s1")))
        #expect(
            machine.changesApplied(newState: "s2", hasMore: true, counts: ChangeCounts(created: 2))
                == .continueSync(.fetchChanges(since: "s2")))
        #expect(machine.localState == "s2")
        let action = machine.changesApplied(newState: "s3", hasMore: false, counts: ChangeCounts(destroyed: 1))
        #expect(
            action
                == .finish(
                    SyncReport(pages: 2, created: 2, destroyed: 1, state: "s3", outcome: .completed), followUp: nil))
    }

    @Test("a signal carrying the local state is skipped, idle or syncing")
    func staleSignalSkipped() {
        var machine = Machine(localState: "s1")
        #expect(machine.trigger(.signal(state: "s1")) == .skip)
        #expect(!machine.isSyncing)
        #expect(machine.trigger(.signal(state: "s2")) == .startSync(.fetchChanges(since: "s1")))
        _ = machine.changesApplied(newState: "s2", hasMore: true, counts: ChangeCounts())
        #expect(machine.trigger(.signal(state: "s2")) == .skip)
        #expect(!machine.hasFollowUp)
    }

    @Test("a signal without st always syncs")
    func signalWithoutState() {
        var machine = Machine(localState: "s1")
        #expect(machine.trigger(.signal(state: nil)) == .startSync(.fetchChanges(since: "s1")))
    }

    @Test("triggers during a run collapse into one follow-up")
    func followUpCollapses() {
        var machine = Machine(localState: "s1")
        _ = machine.trigger(.launch)
        #expect(machine.trigger(.signal(state: "s4")) == .joinedFollowUp)
        #expect(machine.trigger(.signal(state: "s5")) == .joinedFollowUp)
        #expect(machine.trigger(.timer) == .joinedFollowUp)
        #expect(machine.hasFollowUp)
        let action = machine.changesApplied(newState: "s3", hasMore: false, counts: ChangeCounts(created: 1))
        #expect(
            action
                == .finish(SyncReport(pages: 1, created: 1, state: "s3"), followUp: .fetchChanges(since: "s3")))
        #expect(machine.isSyncing && !machine.hasFollowUp)
        guard case .finish(_, nil) = machine.changesApplied(newState: "s5", hasMore: false, counts: ChangeCounts())
        else {
            Issue.record("the follow-up should end without another")
            return
        }
        #expect(!machine.isSyncing)
    }

    @Test("a follow-up of signals whose state the run reached is dropped (duplicate signals)")
    func followUpDroppedWhenReached() {
        var machine = Machine(localState: "s1")
        _ = machine.trigger(.signal(state: "s3"))
        #expect(machine.trigger(.signal(state: "s3")) == .joinedFollowUp)
        #expect(machine.trigger(.signal(state: "s3")) == .joinedFollowUp)
        let action = machine.changesApplied(newState: "s3", hasMore: false, counts: ChangeCounts(updated: 1))
        #expect(action == .finish(SyncReport(pages: 1, updated: 1, state: "s3"), followUp: nil))
        #expect(!machine.isSyncing)
    }

    @Test("cannotCalculateChanges and invalidState switch the run to a full resync")
    func cannotCalculateChanges() {
        for error in [MailSyncError.cannotCalculateChanges, .invalidState] {
            var machine = Machine(localState: "old")
            _ = machine.trigger(.manual)
            #expect(machine.stepFailed(error) == .continueSync(.fullResync))
            guard case .finish(let report, nil) = machine.fullResyncApplied(state: "s9", counts: ChangeCounts()) else {
                Issue.record("expected finish")
                return
            }
            #expect(report.fullResync && report.state == "s9" && report.fetchResult == .noData)
        }
    }

    @Test("401 stops syncing and reports; triggers are rejected until credentials are renewed")
    func unauthorizedStops() {
        var machine = Machine(localState: "s1")
        _ = machine.trigger(.launch)
        _ = machine.trigger(.timer)
        let action = machine.stepFailed(.unauthorized)
        #expect(action == .finish(SyncReport(state: "s1", outcome: .failed(.unauthorized)), followUp: nil))
        #expect(machine.stoppedBy == .unauthorized)
        #expect(machine.trigger(.signal(state: "s2")) == .rejected(.unauthorized))
        #expect(machine.credentialsRenewed() == .none)
        #expect(machine.trigger(.manual) == .startSync(.fetchChanges(since: "s1")))
    }

    @Test("network errors and 5xx retry with growing backoff, then give up")
    func backoff() {
        let policy = SyncRetryPolicy(
            initialDelay: .milliseconds(100), multiplier: 2, maximumDelay: .milliseconds(350), maximumAttempts: 3)
        var machine = Machine(localState: "s1", retryPolicy: policy)
        _ = machine.trigger(.launch)
        let step = Machine.Step.fetchChanges(since: "s1")
        #expect(machine.stepFailed(.network("reset")) == .retry(step, after: .milliseconds(100), attempt: 1))
        #expect(machine.retryDue() == .continueSync(step))
        #expect(
            machine.stepFailed(.server(status: 503, code: nil, retryAfter: nil))
                == .retry(step, after: .milliseconds(200), attempt: 2))
        #expect(
            machine.stepFailed(.server(status: 429, code: nil, retryAfter: .seconds(2)))
                == .retry(step, after: .seconds(2), attempt: 3))
        let action = machine.stepFailed(.network("reset"))
        #expect(action == .finish(SyncReport(state: "s1", outcome: .failed(.network("reset"))), followUp: nil))
        #expect(SyncReport(state: "s1", outcome: .failed(.network("reset"))).fetchResult == .failed)
        #expect(policy.delay(forAttempt: 10) == .milliseconds(350))
    }

    @Test("a success resets the failure count")
    func successResetsFailures() {
        var machine = Machine(localState: "s1", retryPolicy: SyncRetryPolicy(maximumAttempts: 1))
        _ = machine.trigger(.launch)
        guard case .retry = machine.stepFailed(.network("x")) else {
            Issue.record("expected a retry")
            return
        }
        _ = machine.changesApplied(newState: "s2", hasMore: true, counts: ChangeCounts())
        guard case .retry = machine.stepFailed(.network("x")) else {
            Issue.record("expected a retry after progress")
            return
        }
    }

    @Test("other 4xx errors end the run without retry")
    func clientErrorsFail() {
        var machine = Machine(localState: "s1")
        _ = machine.trigger(.launch)
        let error = MailSyncError.server(status: 403, code: "forbidden", retryAfter: nil)
        #expect(machine.stepFailed(error) == .finish(SyncReport(state: "s1", outcome: .failed(error)), followUp: nil))
    }

    @Test("a network loss mid-run resumes from the last applied page")
    func resumeFromLastPage() {
        var machine = Machine(localState: "s1")
        _ = machine.trigger(.signal(state: "s9"))
        _ = machine.changesApplied(newState: "s4", hasMore: true, counts: ChangeCounts(created: 3))
        guard case .retry(let step, _, _) = machine.stepFailed(.network("reset")) else {
            Issue.record("expected a retry")
            return
        }
        #expect(step == .fetchChanges(since: "s4"))
    }

    @Test("a deadline ends the run; applied pages count as new data")
    func deadline() {
        var machine = Machine(localState: "s1")
        _ = machine.trigger(.signal(state: "s9"))
        _ = machine.changesApplied(newState: "s4", hasMore: true, counts: ChangeCounts(created: 3))
        let action = machine.deadlineExpired()
        #expect(
            action
                == .finish(SyncReport(pages: 1, created: 3, state: "s4", outcome: .deadlineExceeded), followUp: nil))
        if case .finish(let report, _) = action { #expect(report.fetchResult == .newData) }
        #expect(machine.localState == "s4")

        var empty = Machine(localState: "s1")
        _ = empty.trigger(.signal(state: "s9"))
        if case .finish(let report, _) = empty.deadlineExpired() { #expect(report.fetchResult == .failed) }
    }

    @Test("hasMore without progress is an invalid response, not a loop")
    func noProgress() {
        var machine = Machine(localState: "s1")
        _ = machine.trigger(.launch)
        guard case .finish(let report, _) = machine.changesApplied(newState: "s1", hasMore: true, counts: .init())
        else {
            Issue.record("expected finish")
            return
        }
        guard case .failed(.invalidResponse) = report.outcome else {
            Issue.record("expected invalidResponse, got \(report.outcome)")
            return
        }
    }

    @Test("events that do not fit the phase are ignored")
    func strayEvents() {
        var machine = Machine(localState: "s1")
        #expect(machine.retryDue() == .none)
        #expect(machine.deadlineExpired() == .none)
        #expect(machine.stepFailed(.network("x")) == .none)
        #expect(machine.changesApplied(newState: "s2", hasMore: false, counts: .init()) == .none)
        #expect(machine.fullResyncApplied(state: "s2", counts: .init()) == .none)
        #expect(machine.localState == "s1")
    }

    @Test("a change announced with the local state is skipped; with another state it syncs")
    func announcedChanges() {
        var machine = Machine(localState: "s1")
        machine.tagger = SignalTagger(key: [1, 2, 3]) { _, message in message }
        #expect(machine.trigger(.change(state: "s1")) == .skip, "compared with the state itself, not its tag")
        #expect(machine.trigger(.change(state: "s2")) == .startSync(.fetchChanges(since: "s1")))
        #expect(machine.trigger(.change(state: "s1")) == .skip)
        var empty = Machine(localState: nil)
        #expect(empty.trigger(.change(state: "s1")) == .startSync(.fullResync))
        var anonymous = Machine(localState: "s1")
        #expect(anonymous.trigger(.change(state: nil)) == .startSync(.fetchChanges(since: "s1")))
    }

    @Test("a flood of changes during a run leaves one follow-up, dropped when the run reached the newest")
    func announcedChangesCollapse() {
        var machine = Machine(localState: "s1")
        _ = machine.trigger(.change(state: "s2"))
        for modseq in 3...500 { #expect(machine.trigger(.change(state: "s\(modseq)")) == .joinedFollowUp) }
        guard case .finish(_, let followUp) = machine.changesApplied(newState: "s500", hasMore: false, counts: .init())
        else {
            Issue.record("expected finish")
            return
        }
        #expect(followUp == nil, "the run reached the newest announced state")
        #expect(!machine.isSyncing)

        _ = machine.trigger(.change(state: "s501"))
        _ = machine.trigger(.change(state: "s502"))
        _ = machine.trigger(.change(state: "s503"))
        let action = machine.changesApplied(newState: "s502", hasMore: false, counts: .init())
        #expect(action == .finish(SyncReport(pages: 1, state: "s502"), followUp: .fetchChanges(since: "s502")))
        #expect(!machine.hasFollowUp, "one follow-up, with nothing queued behind it")
    }

    @Test("a change without a state during a run always means a follow-up")
    func anonymousChangeFollowsUp() {
        var machine = Machine(localState: "s1")
        _ = machine.trigger(.change(state: "s2"))
        #expect(machine.trigger(.change(state: nil)) == .joinedFollowUp)
        let action = machine.changesApplied(newState: "s2", hasMore: false, counts: .init())
        #expect(action == .finish(SyncReport(pages: 1, state: "s2"), followUp: .fetchChanges(since: "s2")))
    }
}
