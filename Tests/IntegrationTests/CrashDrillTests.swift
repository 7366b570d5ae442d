import Foundation
import HTTPClient
import Locking
import TestSupport
import Testing

@Suite(.serialized) struct MailboxdCrashDrillTests {
    /// `kill -9` mailboxd during a burst of 1,000 deliveries from 8 concurrent senders, then restart it.
    /// Every delivery that got a 201 is present, and each device receives a signal whose `st` is the final state.
    @Test func acknowledgedDeliveriesSurviveKillNine() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"])
        let session = try await cluster.login("alice")
        var streams: [(token: String, stream: NotificationStream)] = []
        for _ in 0..<2 {
            let token = try await cluster.registerDevice(session: session)
            streams.append((token, try await cluster.notifications(token)))
        }
        let acknowledged = Shared<[String]>([])
        let attempts = Shared(0)
        let killed = Shared(false)
        await withTaskGroup(of: Void.self) { group in
            for sender in 0..<8 {
                group.addTask {
                    while true {
                        let n = attempts.withLock { value -> Int in
                            value += 1
                            return value
                        }
                        if n > 1000 { return }
                        // A sender that gets no answer tries again, as a mail transfer agent would.
                        for _ in 0..<200 {
                            let result = try? await cluster.call(
                                .post, cluster.api + "/v1/deliveries", token: cluster.deliveryToken,
                                json: [
                                    "to": "alice", "from": "s\(sender)@example.com", "subject": "m\(n)",
                                    "body": "b\(n)",
                                ])
                            if let result, result.status == 201, let id = result.body["id"] as? String {
                                acknowledged.withLock { $0.append(id) }
                                break
                            }
                            try? await Task.sleep(for: .milliseconds(50))
                        }
                        // Crash the server a third of the way in; the senders keep going through the restart.
                        if n == 330 && killed.withLock({ !$0 }) {
                            killed.withLock { $0 = true }
                            try? cluster.crashAndRestartMailboxd()
                        }
                    }
                }
            }
        }
        #expect(killed.withLock { $0 })
        let ids = acknowledged.withLock { $0 }
        #expect(ids.count > 500, "too few deliveries acknowledged: \(ids.count)")

        // Every acknowledged delivery is present.
        var present = Set<String>()
        var cursor: String?
        var finalState = ""
        repeat {
            let query = cursor.map { "?limit=1000&cursor=\($0)" } ?? "?limit=1000"
            let page = try await cluster.call(.get, cluster.api + "/v1/messages" + query, token: session)
            try #require(page.status == 200)
            for message in page.body["messages"] as? [[String: Any]] ?? [] {
                if let id = message["id"] as? String { present.insert(id) }
            }
            if cursor == nil { finalState = page.body["state"] as? String ?? "" }
            cursor = page.body["nextCursor"] as? String
        } while cursor != nil
        let lost = ids.filter { !present.contains($0) }
        #expect(lost.isEmpty, "\(lost.count) acknowledged deliveries lost")

        // Each device converges on a signal carrying the final state's tag.
        for (token, stream) in streams {
            let finalTag = try #require(cluster.tag(of: finalState, device: token))
            #expect(
                await stream.waitForLastTag(finalTag),
                "a device's last signal is \(stream.lastTag ?? "none"), the final state \(finalState)")
        }
    }
}

/// A value shared between tasks, behind a mutex.
final class Shared<Value: Sendable>: Sendable {
    private let value: LockedValue<Value>
    init(_ value: Value) { self.value = LockedValue(value) }
    func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R { value.withLock { body(&$0) } }
}

@Suite(.serialized) struct ProviderTokenRestartTests {
    /// Restarts must not count as provider-token updates: APNs refuses a key's token replaced more than once in
    /// 20 minutes, so mailboxd keeps its token across restarts.
    @Test func restartsReuseTheProviderToken() async throws {
        let cluster = try await Cluster.start(accounts: ["alice"])
        let session = try await cluster.login("alice")
        let token = try await cluster.registerDevice(session: session)
        let stream = try await cluster.notifications(token)
        _ = await stream.waitFor(count: 1)
        for round in 0..<3 {
            try await offPool { try cluster.crashAndRestartMailboxd() }
            let receipt = try await cluster.deliver(to: "alice", subject: "after restart \(round)", body: "x")
            let state = try #require(receipt["state"] as? String)
            let tag = try #require(cluster.tag(of: state, device: token))
            #expect(await stream.waitForLastTag(tag), "round \(round): no signal for \(state)")
        }
        let log = String(decoding: try await cluster.call(.get, cluster.sim + "/sim/log").data, as: UTF8.self)
        #expect(!log.contains("TooManyProviderTokenUpdates"))
    }
}
