import Foundation
import MailboxStore
import SignalDispatch
import TestSupport
import Testing

@testable import MailboxService

/// JMAP's event source (`GET /jmap/eventsource`, RFC 8620 §7.3) as a client reads it from a running service (curl
/// holding the stream): a StateChange for each commit naming only the types asked for, `Last-Event-ID` answered
/// with what changed since, `closeafter=state`, pings at the asked interval, and nothing kept once streams end.
@Suite("JMAP event source")
struct JMAPEventSourceTests {
    final class Service: Sendable {
        let directory: TemporaryDirectory
        let service: MailboxService
        let curl: String
        var api: String { "http://127.0.0.1:\(service.port)" }

        init() throws {
            directory = try TemporaryDirectory(prefix: "eventsource")
            var configuration = ServiceConfiguration(dataDirectory: directory.path("data"), deliveryToken: "t")
            configuration.port = 0
            configuration.store.passwordParameters = .testing
            service = try MailboxService(configuration: configuration, router: PushRouter([RecordingPushService()]))
            curl = try requireTool("curl")
        }

        /// A stream held by curl with alice's password, open once its opening comment has arrived.
        func open(_ query: String, lastEventID: String? = nil) async throws -> ChildProcess {
            let basic = "Basic " + Data("alice:password-alice".utf8).base64EncodedString()
            var arguments = ["-sN", "-H", "Authorization: \(basic)"]
            if let lastEventID { arguments += ["-H", "Last-Event-ID: \(lastEventID)"] }
            let listener = try ChildProcess(
                curl, arguments + [api + "/jmap/eventsource?" + query], logDirectory: directory.url.path)
            let opened = try await offPool { listener.waitForOutput(timeout: 30) { $0.contains(": stream opened") } }
            #expect(opened, "the event stream did not open: \(listener.errorOutput)")
            return listener
        }

        @discardableResult
        func deliver() async throws -> DeliveryReceipt {
            try await service.store.deliver(NewMessage(to: "alice", from: "x@example.com", subject: "Hi", body: "B"))
        }
    }

    /// The `id:` lines of a stream's state events, in order.
    static func stateIDs(_ output: String) -> [String] {
        output.components(separatedBy: "\n\n").compactMap { event in
            let lines = event.split(separator: "\n")
            guard lines.contains("event: state") else { return nil }
            return lines.first { $0.hasPrefix("id: ") }.map { String($0.dropFirst(4)) }
        }
    }

    @Test func eachCommitIsOneStateChangeOfTheTypesAsked() async throws {
        let setup = try Service()
        _ = try await setup.service.store.createAccount(username: "alice", password: "password-alice")
        let listener = try await setup.open("types=Email&closeafter=no&ping=0")
        try await setup.deliver()
        #expect(try await offPool { listener.waitForOutput(timeout: 30) { Self.stateIDs($0).count == 1 } })
        try await setup.deliver()
        #expect(try await offPool { listener.waitForOutput(timeout: 30) { Self.stateIDs($0).count == 2 } })
        listener.stop()
        let output = listener.output
        let ids = Self.stateIDs(output)
        #expect(ids.count == 2 && ids[0] != ids[1], "\(output)")
        #expect(output.contains("\"Email\"") && !output.contains("\"Mailbox\""), "only the types asked: \(output)")
        await setup.service.shutdown()
    }

    @Test func lastEventIDIsAnsweredWithWhatChangedSince() async throws {
        let setup = try Service()
        _ = try await setup.service.store.createAccount(username: "alice", password: "password-alice")
        // A first stream learns the state after one delivery, and ends (closeafter=state).
        let first = try await setup.open("types=*&closeafter=state&ping=0")
        try await setup.deliver()
        #expect(await eventually { !first.isRunning })
        let seen = try #require(Self.stateIDs(first.output).first, "\(first.output)")

        // Naming the current state: nothing at once; the next delivery is heard.
        let current = try await setup.open("types=*&closeafter=state&ping=0", lastEventID: seen)
        #expect(Self.stateIDs(current.output).isEmpty, "\(current.output)")
        try await setup.deliver()
        #expect(await eventually { !current.isRunning })
        let newer = try #require(Self.stateIDs(current.output).first, "\(current.output)")
        #expect(newer != seen)

        // Naming an older state, or one not ours: what changed since comes at once, with no delivery.
        for lastEventID in [seen, "not-a-state"] {
            let behind = try await setup.open("types=*&closeafter=state&ping=0", lastEventID: lastEventID)
            #expect(await eventually { !behind.isRunning })
            #expect(Self.stateIDs(behind.output) == [newer], "\(behind.output)")
        }
        await setup.service.shutdown()
    }

    @Test func pingsComeAtTheAskedIntervalAndEndedStreamsAreForgotten() async throws {
        let setup = try Service()
        _ = try await setup.service.store.createAccount(username: "alice", password: "password-alice")
        let streams = setup.service.api.jmapEventStreams
        let pinged = try await setup.open("types=*&closeafter=no&ping=5")
        let quiet = try await setup.open("types=*&closeafter=state&ping=0")
        #expect(streams.count == 2)
        #expect(
            try await offPool {
                pinged.waitForOutput(timeout: 30) { $0.contains("event: ping\ndata: {\"interval\":5}\n\n") }
            })
        #expect(!quiet.output.contains("event: ping"), "no pings unless asked: \(quiet.output)")
        // The server ends the quiet stream after its StateChange; the pinged one's client goes away, which its
        // next pings reveal.
        try await setup.deliver()
        #expect(await eventually { !quiet.isRunning })
        #expect(try await offPool { pinged.waitForOutput(timeout: 30) { Self.stateIDs($0).count == 1 } })
        pinged.stop()
        let wakeups = setup.service.api.jmapWakeups
        #expect(await eventually(timeout: .seconds(60)) { streams.count == 0 && wakeups.count == 0 })
        await setup.service.shutdown()
    }
}
